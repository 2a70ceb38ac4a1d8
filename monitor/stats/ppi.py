"""The judge's severe rate corrected by a few human labels: prediction-powered inference
(Angelopoulos et al. 2023, "Prediction-powered inference") with PPI++'s power tuning
(Angelopoulos, Duchi, Zrnic 2023, "PPI++"), for a mean of a 0/1 outcome (pure; numpy).

Labelled random sample of n turns: human outcome Y (severe or not) and the judge's f on each.
Unlabelled turns of the same population: the judge's f~ on N turns. The estimate

    theta = lambda * mean(f~) + mean(Y - lambda * f)

is unbiased for E[Y] for every lambda (the judge's bias cancels out: mean(f~) - mean(f) has
expectation 0); lambda = Cov(Y, f) / ((1 + n/N) Var(f)), clipped to [0, 1], minimises its
variance  lambda^2 Var(f~)/N + Var(Y - lambda f)/n.  lambda = 0 is the labels-only estimate, so a
useless judge costs nothing. The interval is the normal (CLT) one of both papers.

Labels drawn with unequal, known inclusion probabilities (``casewatch labels export --strategy
uncertain``, active inference: Zrnic & Candes 2024, "Active statistical inference") need the
inverse-probability-weighted form instead (``WeightedTerms``): over the N turns of the frame,

    psi_i = lambda * f_i + xi_i / pi_i * (Y_i - lambda * f_i)

(xi_i = 1 when turn i was labelled, pi_i its probability of being labelled), whose mean is
unbiased for E[Y] for every lambda, because E[xi_i / pi_i] = 1. With pi_i = n/N it is the
uniform case again. lambda minimises the variance of psi; the standard error is sd(psi)/sqrt(N).
The anytime-valid sequence over batches (``monitor.stats.confidence_sequence``) takes these
per-batch estimates and standard errors.

Not ppi_py: it requires numba, pandas, statsmodels and gdown for what is these few lines
(docs/dependencies.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Interval:
    point: float | None
    lower: float | None
    upper: float | None
    n: int

    @property
    def width(self) -> float:
        if self.lower is None or self.upper is None:
            return math.inf
        return self.upper - self.lower


@dataclass(frozen=True)
class RateEstimates:
    """The same rate three ways: corrected (PPI++), the judge alone, the labels alone."""

    ppi: Interval
    judge_only: Interval
    labels_only: Interval
    lam: float | None  # the power-tuning weight actually used
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_EMPTY = Interval(None, None, None, 0)


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


def _interval(point: float, variance: float, n: int, z: float) -> Interval:
    half = z * math.sqrt(max(variance, 0.0))
    return Interval(_clip(point), _clip(point - half), _clip(point + half), n)


def rate_estimates(
    human: Sequence[float] | np.ndarray,
    judge_labelled: Sequence[float] | np.ndarray,
    judge_unlabelled: Sequence[float] | np.ndarray,
    *,
    confidence: float = 0.95,
    lam: float | None = None,
) -> RateEstimates:
    """``human[i]`` and ``judge_labelled[i]`` (0/1) on the same labelled turn; the judge's 0/1
    on the unlabelled turns. ``lam`` fixes lambda (None: PPI++'s power tuning)."""
    y = np.asarray(human, dtype=float)
    f = np.asarray(judge_labelled, dtype=float)
    g = np.asarray(judge_unlabelled, dtype=float)
    if y.shape != f.shape:
        raise ValueError("human and judge_labelled must have one value per labelled turn")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    n, big_n = len(y), len(g)
    # The judge's own rate is over every turn it scored, the labelled ones included.
    every = np.concatenate([f, g])
    judge_only = (
        _interval(float(every.mean()), float(every.var()) / len(every), len(every), z)
        if len(every)
        else _EMPTY
    )
    if n < 2:
        return RateEstimates(_EMPTY, judge_only, _EMPTY, None, confidence)
    labels_only = _interval(float(y.mean()), float(y.var(ddof=1)) / n, n, z)
    if big_n < 2:
        return RateEstimates(labels_only, judge_only, labels_only, 0.0, confidence)
    if lam is None:
        var_f = float(np.var(np.concatenate([f, g]), ddof=1))
        cov = float(np.cov(y, f, ddof=1)[0, 1])
        lam = _clip(cov / ((1 + n / big_n) * var_f)) if var_f > 0 else 0.0
    point = lam * float(g.mean()) + float((y - lam * f).mean())
    variance = lam**2 * float(g.var(ddof=1)) / big_n + float((y - lam * f).var(ddof=1)) / n
    return RateEstimates(_interval(point, variance, n, z), judge_only, labels_only, lam, confidence)


@dataclass(frozen=True)
class WeightedTerms:
    """A frame's inverse-probability-weighted terms: psi_i = lambda * a_i + b_i, with
    a_i = f_i (1 - xi_i / pi_i) and b_i = xi_i Y_i / pi_i."""

    a: np.ndarray
    b: np.ndarray
    labelled: int

    @property
    def size(self) -> int:
        return int(self.a.size)

    def tuned_lambda(self) -> float:
        """The lambda in [0, 1] minimising the variance of psi (1 when it cannot be told)."""
        if self.size < 2:
            return 1.0
        var_a = float(np.var(self.a, ddof=1))
        if var_a <= 0:
            return 1.0
        cov = float(np.cov(self.a, self.b, ddof=1)[0, 1])
        return _clip(-cov / var_a)

    def estimate(self, lam: float) -> tuple[float, float]:
        """(point, standard error) for this lambda."""
        psi = lam * self.a + self.b
        if self.size < 2:
            return float(psi.mean()) if self.size else math.nan, math.inf
        return float(psi.mean()), float(psi.std(ddof=1)) / math.sqrt(self.size)


def weighted_terms(
    judge: Sequence[float] | np.ndarray,
    labelled: Sequence[bool] | np.ndarray,
    human: Sequence[float] | np.ndarray,
    inclusion: Sequence[float] | np.ndarray,
    frame_weights: Sequence[float] | np.ndarray | None = None,
) -> WeightedTerms:
    """Per frame turn: the judge's 0/1, whether it was labelled, the human 0/1 (any value where
    not labelled) and its inclusion probability (> 0 wherever it was labelled).

    ``frame_weights``: how many turns of traffic each frame turn stands for (1 / the
    probability the cascade drew it for the judge; None: 1 each). The terms are then scaled by
    the weights normalised to mean 1, so their mean is the Hajek estimate over traffic rather
    than over the judged frame."""
    f = np.asarray(judge, dtype=float)
    xi = np.asarray(labelled, dtype=bool)
    y = np.asarray(human, dtype=float)
    pi = np.asarray(inclusion, dtype=float)
    if not f.shape == xi.shape == y.shape == pi.shape:
        raise ValueError("judge, labelled, human and inclusion need one value per frame turn")
    if np.any(xi & ~(pi > 0)) or np.any(pi > 1):
        raise ValueError("a labelled turn needs an inclusion probability in (0, 1]")
    w = np.where(xi, 1.0 / np.where(xi, pi, 1.0), 0.0)
    a, b = f * (1.0 - w), np.where(xi, y, 0.0) * w
    if frame_weights is not None:
        fw = np.asarray(frame_weights, dtype=float)
        if fw.shape != f.shape or np.any(~(fw > 0)) or not np.all(np.isfinite(fw)):
            raise ValueError("one finite, positive frame weight per frame turn")
        scale = fw * (fw.size / fw.sum())
        a, b = a * scale, b * scale
    return WeightedTerms(a, b, int(xi.sum()))


def weighted_interval(
    terms: WeightedTerms, *, confidence: float = 0.95, lam: float | None = None
) -> tuple[Interval, float]:
    """The fixed-n (CLT) interval of the weighted estimate, and the lambda used."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    lam = terms.tuned_lambda() if lam is None else lam
    point, se = terms.estimate(lam)
    if terms.labelled < 2 or not math.isfinite(se):
        return _EMPTY, lam
    return _interval(point, se**2, terms.labelled, z), lam
