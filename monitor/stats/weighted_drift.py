"""The drift tests with each sample weighted by 1/π, its inverse inclusion probability (pure).

Under ``sampling.strategy: cascade`` the judged turns are drawn with a probability π per turn
(risky cells near 1, the rest near the floor), and the probabilities move with the budget and
the learned risks, so two windows of an unchanged traffic can hold different mixes of judged
turns. Weighting each turn by ``w = 1/π`` makes every share, ECDF and rank statistic below a
figure of the traffic (Hájek's ratio), not of what was judged; the evidence is Kish's effective
sample size ``n_eff = (Σw)² / Σw²`` per window, which stands for ``n`` in each test:

- proportions: Hájek shares; two-proportion z with the share pooled over the n_eff's; Fisher's
  exact test on counts rounded from share × n_eff when an expected count is below 5; Cohen's h
  of the weighted shares;
- shares: chi-square on the weighted shares scaled to each window's n_eff (Cramér's V, PSI);
- continuous: KS D of the weighted ECDFs, p from ``kstwo.sf(D, round(n1e·n0e/(n1e+n0e)))``
  (what ``ks_2samp`` itself does for large samples); weighted means, medians, Cliff's delta;
- rank: the weighted probability of superiority (ties count half) as U = A·n1e·n0e, with
  Mann-Whitney's normal approximation (tie-corrected, continuity 0.5) at the n_eff's.

With every weight equal each test gives the unweighted test's figures (the KS p-value that of
``ks_2samp(method="asymp")``, Mann-Whitney's that of ``method="asymptotic"``). ``min_turns``
still counts samples: a weight adds no evidence. Kish's n_eff is an approximation: it ignores
how the weights correlate with the values, so a test's p-value is approximate where they do.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from monitor.config.drift import DriftConfig
from monitor.stats.drift_stats import (
    Kind,
    SignalResult,
    _finite,
    _insufficient,
    _quiet,
    chi2_shares,
    share_columns,
    st,
    two_proportions,
)

__all__ = [
    "kish_n_eff",
    "weighted_continuous_test",
    "weighted_proportion_test",
    "weighted_rank_test",
    "weighted_shares_test",
    "weighted_superiority",
]


def kish_n_eff(weight_sum: float, weight_sq_sum: float) -> float:
    """Kish's effective sample size (Σw)² / Σw² (0 for no weight)."""
    return weight_sum * weight_sum / weight_sq_sum if weight_sq_sum > 0 else 0.0


def _arr(values: Sequence[float]) -> NDArray[np.float64]:
    return np.asarray(values, dtype=float)


def _n_eff(weights: NDArray[np.float64]) -> float:
    return kish_n_eff(float(weights.sum()), float(np.dot(weights, weights)))


def _n_eff_details(n1e: float, n0e: float) -> dict[str, float]:
    return {"recent_n_eff": n1e, "reference_n_eff": n0e, "weighted": 1.0}


# ---------------------------------------------------------------- proportions


def weighted_proportion_test(
    signal: str,
    kind: Kind,
    recent: tuple[int, float, float, float],
    reference: tuple[int, float, float, float],
    cfg: DriftConfig,
) -> SignalResult:
    """Each window as ``(n, Σw·y, Σw, Σw²)`` (y = 1 for a bad sample): Hájek shares, the
    two-proportion z at the n_eff's, Fisher's exact on rounded counts when an expected count is
    below 5. Effect = Cohen's h of the weighted shares (signed)."""
    n1, x1w, w1, w1sq = recent
    n0, x0w, w0, w0sq = reference
    early = _insufficient(signal, kind, "weighted_two_proportion_z", "cohens_h", n1, n0,
                          cfg.min_turns)  # fmt: skip
    if early:
        return early
    p1, p0 = x1w / w1, x0w / w0
    n1e, n0e = kish_n_eff(w1, w1sq), kish_n_eff(w0, w0sq)
    m1, m0 = round(n1e), round(n0e)
    a, b = min(m1, round(p1 * n1e)), min(m0, round(p0 * n0e))
    return two_proportions(
        signal,
        kind,
        (n1, n0),
        (p1, p0),
        (n1e, n0e),
        (p1 * n1e + p0 * n0e) / (n1e + n0e),
        [[a, m1 - a], [b, m0 - b]],
        cfg,
        prefix="weighted_",
        details=_n_eff_details(n1e, n0e),
    )


# ---------------------------------------------------------------- shares


def weighted_shares_test(
    signal: str,
    kind: Kind,
    recent: tuple[int, Mapping[str, float], float],
    reference: tuple[int, Mapping[str, float], float],
    cfg: DriftConfig,
    *,
    effect_name: Literal["cramers_v", "psi"],
    order: Sequence[str] | None = None,
) -> SignalResult:
    """Each window as ``(n, {category: Σw}, Σw²)``: chi-square of homogeneity on the weighted
    shares scaled to each window's n_eff (columns pooled as ``shares_test`` pools counts)."""
    n1, w1_by, w1sq = recent
    n0, w0_by, w0sq = reference
    early = _insufficient(signal, kind, "weighted_chi2", effect_name, n1, n0, cfg.min_turns)
    if early:
        return early
    w1, w0 = sum(w1_by.values()), sum(w0_by.values())
    n1e, n0e = kish_n_eff(w1, w1sq), kish_n_eff(w0, w0sq)
    scaled1 = {c: v / w1 * n1e for c, v in w1_by.items()}
    scaled0 = {c: v / w0 * n0e for c, v in w0_by.items()}
    names, r, q = share_columns(scaled1, scaled0, order, cfg.max_categories)
    return chi2_shares(
        signal,
        kind,
        (n1, n0),
        names,
        (r, q),
        n1e + n0e,
        effect_name,
        cfg,
        test="weighted_chi2",
        details=_n_eff_details(n1e, n0e),
    )


# ---------------------------------------------------------------- distributions


def weighted_ks_d(
    x: Sequence[float], a: Sequence[float], y: Sequence[float], b: Sequence[float]
) -> float:
    """max |F_x(v) - F_y(v)| of the two weighted ECDFs (values ``x`` with weights ``a``...)."""
    xs, ws_x, ys, ws_y = _arr(x), _arr(a), _arr(y), _arr(b)
    grid = np.unique(np.concatenate([xs, ys]))
    fx = _cdf(xs, ws_x, grid)
    fy = _cdf(ys, ws_y, grid)
    return float(np.max(np.abs(fx - fy)))


def _cdf(
    values: NDArray[np.float64], weights: NDArray[np.float64], grid: NDArray[np.float64]
) -> NDArray[np.float64]:
    order = np.argsort(values, kind="stable")
    v, cum = values[order], np.cumsum(weights[order])
    idx = np.searchsorted(v, grid, side="right")
    below = np.where(idx > 0, cum[np.maximum(idx - 1, 0)], 0.0)
    return np.asarray(below / cum[-1], dtype=float)


def weighted_superiority(
    x: Sequence[float], a: Sequence[float], y: Sequence[float], b: Sequence[float]
) -> tuple[float, float]:
    """(P(X > Y), P(X < Y)) with X drawn by weights ``a`` from ``x``, Y by ``b`` from ``y``."""
    xs, wa, ys, wb = _arr(x), _arr(a), _arr(y), _arr(b)
    order = np.argsort(ys, kind="stable")
    ys, wb = ys[order], wb[order]
    cum = np.concatenate([[0.0], np.cumsum(wb)])
    total = cum[-1]
    lo = cum[np.searchsorted(ys, xs, side="left")]  # weight of y < x_i
    hi = total - cum[np.searchsorted(ys, xs, side="right")]  # weight of y > x_i
    norm = float(wa.sum()) * float(total)
    return float(np.dot(wa, lo)) / norm, float(np.dot(wa, hi)) / norm


def _weighted_median(values: NDArray[np.float64], weights: NDArray[np.float64]) -> float:
    order = np.argsort(values, kind="stable")
    v, cum = values[order], np.cumsum(weights[order])
    return float(v[int(np.searchsorted(cum, 0.5 * cum[-1], side="left"))])


def _weighted_location(
    x: Sequence[float], a: Sequence[float], y: Sequence[float], b: Sequence[float]
) -> dict[str, float]:
    xs, wa, ys, wb = _arr(x), _arr(a), _arr(y), _arr(b)
    return {
        "recent_mean": float(np.average(xs, weights=wa)),
        "reference_mean": float(np.average(ys, weights=wb)),
        "recent_median": _weighted_median(xs, wa),
        "reference_median": _weighted_median(ys, wb),
    }


def weighted_continuous_test(
    signal: str,
    kind: Kind,
    recent: tuple[Sequence[float], Sequence[float]],
    reference: tuple[Sequence[float], Sequence[float]],
    cfg: DriftConfig,
) -> SignalResult:
    """KS on the weighted ECDFs, each window as ``(values, weights)``; effect = KS D."""
    x, a = recent
    y, b = reference
    early = _insufficient(signal, kind, "weighted_ks", "ks_d", len(x), len(y), cfg.min_turns)
    if early:
        return early
    d = weighted_ks_d(x, a, y, b)
    n1e, n0e = _n_eff(_arr(a)), _n_eff(_arr(b))
    en = max(1.0, float(np.round(n1e * n0e / (n1e + n0e))))
    p = float(np.clip(_quiet(lambda: st.kstwo.sf(d, en)), 0.0, 1.0))
    greater, less = weighted_superiority(x, a, y, b)
    location = _weighted_location(x, a, y, b)
    return SignalResult(
        signal=signal,
        kind=kind,
        test="weighted_ks",
        status="ok",
        recent_n=len(x),
        reference_n=len(y),
        statistic=d,
        p_value=_finite(p),
        effect=d,
        effect_name="ks_d",
        min_effect=cfg.min_effect.ks_d,
        shift=location["recent_mean"] - location["reference_mean"],
        details={**location, "cliffs_delta": greater - less, **_n_eff_details(n1e, n0e)},
    )


def weighted_rank_test(
    signal: str,
    kind: Kind,
    recent: tuple[Sequence[float], Sequence[float]],
    reference: tuple[Sequence[float], Sequence[float]],
    cfg: DriftConfig,
) -> SignalResult:
    """Mann-Whitney on the weighted probability of superiority A (ties half): U = A·n1e·n0e,
    normal approximation with the tie correction and continuity 0.5 at the n_eff's; effect =
    Cliff's delta of the weighted samples (-1..1)."""
    x, a = recent
    y, b = reference
    early = _insufficient(signal, kind, "weighted_mannwhitney", "cliffs_delta", len(x), len(y),
                          cfg.min_turns)  # fmt: skip
    if early:
        return early
    xs, wa, ys, wb = _arr(x), _arr(a), _arr(y), _arr(b)
    n1e, n0e = _n_eff(wa), _n_eff(wb)
    greater, less = weighted_superiority(x, a, y, b)
    u = (greater + 0.5 * (1.0 - greater - less)) * n1e * n0e
    if len({*x, *y}) == 1:  # every value the same: nothing to rank
        u, p = n1e * n0e / 2.0, 1.0
    else:
        # Tie counts on the n_eff scale: each value's weighted share of a window times its n_eff.
        values = np.concatenate([xs, ys])
        scaled = np.concatenate([wa / wa.sum() * n1e, wb / wb.sum() * n0e])
        _, inverse = np.unique(values, return_inverse=True)
        t = np.bincount(inverse, weights=scaled)
        n = n1e + n0e
        mu = n1e * n0e / 2.0
        s = math.sqrt(n1e * n0e / 12.0 * ((n + 1.0) - float(np.sum(t**3 - t)) / (n * (n - 1.0))))
        big = max(u, n1e * n0e - u)
        p = min(1.0, float(2.0 * st.norm.sf((big - mu - 0.5) / s))) if s > 0 else 1.0
    location = _weighted_location(x, a, y, b)
    return SignalResult(
        signal=signal,
        kind=kind,
        test="weighted_mannwhitney",
        status="ok",
        recent_n=len(x),
        reference_n=len(y),
        statistic=u,
        p_value=_finite(p),
        effect=greater - less,
        effect_name="cliffs_delta",
        min_effect=cfg.min_effect.cliffs_delta,
        shift=location["recent_mean"] - location["reference_mean"],
        details={**location, **_n_eff_details(n1e, n0e)},
    )
