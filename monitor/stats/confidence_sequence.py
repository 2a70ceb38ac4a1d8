"""Intervals that hold at every look: the asymptotic confidence sequence of Waudby-Smith,
Arbour, Sinha, Kennedy and Ramdas ("Time-uniform central limit theory and asymptotic confidence
sequences", Annals of Statistics 2024), built the way the GLIDE library builds it for
prediction-powered means (``glide.confidence_sequences.asymptotic``), two-sided (pure; numpy).

A dashboard re-reads an estimate at every refresh. A 95 % interval recomputed each time new
labels arrive misses the true rate at *some* look far more often than 5 % of the time (the law
of the iterated logarithm); a confidence sequence (C_k) is built so that
P(for every k: rate in C_k) >= 1 - alpha, whatever the number of looks.

Input: one estimate per batch (a labelling batch's prediction-powered rate) with its standard
error, oldest first. The sequence is centred on the running mean of the batch estimates; with
V_k = sum of squared standard errors up to batch k (the "intrinsic time") its half-width is the
Gaussian-mixture boundary

    (1/k) * sqrt( 2 (V_k rho^2 + 1) / rho^2 * log( sqrt(V_k rho^2 + 1) / alpha ) )

with rho^2 = (-2 log alpha + log(-2 log alpha + 1)) / V_{k*}, which makes the boundary tightest
at batch k* (``tightest_at``). k* changes only the width, never the guarantee.

Not glide-py itself: it requires Python >= 3.12 and casewatch runs on 3.11 (README,
"Dependencies"); these few lines follow its construction and the paper's Proposition.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_TIGHTEST_AT = 10  # GLIDE's default: a factor 10 off costs < 10 % of width


@dataclass(frozen=True)
class SequenceBounds:
    """The sequence at its newest look (batch k)."""

    point: float  # running mean of the batch estimates
    lower: float
    upper: float
    looks: int  # k

    @property
    def width(self) -> float:
        return self.upper - self.lower


def boundary_widths(
    std_errors: Sequence[float] | np.ndarray,
    alpha: float,
    tightest_at: int = DEFAULT_TIGHTEST_AT,
) -> np.ndarray:
    """Half-widths of the sequence at each look, from the batches' standard errors."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if tightest_at < 1:
        raise ValueError(f"tightest_at must be >= 1, got {tightest_at}")
    se = np.asarray(std_errors, dtype=float)
    if se.ndim != 1 or se.size == 0:
        raise ValueError("need one standard error per batch")
    if np.any(~np.isfinite(se)) or np.any(se < 0):
        raise ValueError("standard errors must be finite and >= 0")
    intrinsic = np.cumsum(se**2)
    target = intrinsic[min(tightest_at, se.size) - 1]
    if target <= 0:
        target = float(intrinsic[-1])
    if target <= 0:
        return np.zeros(se.size)  # no uncertainty at all (every estimate exact)
    log_term = -2.0 * math.log(alpha)
    rho2 = (log_term + math.log(log_term + 1.0)) / target
    scaled = intrinsic * rho2 + 1.0
    k = np.arange(1, se.size + 1, dtype=float)
    return np.asarray(np.sqrt(2.0 * scaled / rho2 * np.log(np.sqrt(scaled) / alpha)) / k)


def running_sequence(
    estimates: Sequence[float] | np.ndarray,
    std_errors: Sequence[float] | np.ndarray,
    *,
    confidence: float = 0.95,
    tightest_at: int = DEFAULT_TIGHTEST_AT,
    clip: tuple[float, float] = (0.0, 1.0),
) -> list[SequenceBounds]:
    """The sequence at every look (one per batch), clipped to the rate's range."""
    est = np.asarray(estimates, dtype=float)
    widths = boundary_widths(std_errors, 1.0 - confidence, tightest_at)
    if est.shape != widths.shape:
        raise ValueError("need one standard error per estimate")
    means = np.cumsum(est) / np.arange(1, est.size + 1)
    lo, hi = clip
    return [
        SequenceBounds(
            float(min(hi, max(lo, m))), float(max(lo, m - w)), float(min(hi, m + w)), i + 1
        )
        for i, (m, w) in enumerate(zip(means, widths, strict=True))
    ]
