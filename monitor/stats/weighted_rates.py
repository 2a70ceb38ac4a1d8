"""Rates of the LLM judge's calls over all traffic, from turns drawn with unequal probabilities
(pure; numpy).

A judged turn drawn with probability pi stands for 1/pi turns of traffic (Horvitz & Thompson
1952). The severe share and each metric's severe rate are Hajek ratios

    p = sum_i y_i / pi_i  /  sum_i 1 / pi_i

over the judged turns, with the Poisson-sampling variance sum_i (1 - pi_i) (y_i - p)^2 / pi_i^2
over (sum_i 1/pi_i)^2 (linearised; at pi = r for every turn it is the uniform sample's
(1 - r) p (1 - p) / n). A turn without a stored probability (judged under the uniform strategy)
counts with weight 1, so a store of uniform draws gives the plain share, as before.

When the cheap look's own count of every turn per cell is known (it runs on every turn), the
post-stratified estimate sum_c (N_c / N) p_c, with p_c the Hajek rate inside cell c, removes the
between-cell variance; a cell with traffic and no judged turn takes the overall Hajek rate (and
is named, so the reader knows the estimate leaned on it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from monitor.stats.ppi import Interval


@dataclass(frozen=True)
class WeightedRate:
    point: float | None
    se: float
    judged: int  # judged turns behind it
    represented: float  # turns of traffic they stand for (sum of 1/pi)

    def interval(self, confidence: float = 0.95) -> Interval:
        if self.point is None or not math.isfinite(self.se):
            return Interval(None, None, None, self.judged)
        half = NormalDist().inv_cdf(0.5 + confidence / 2) * self.se
        return Interval(
            self.point, max(0.0, self.point - half), min(1.0, self.point + half), self.judged
        )


EMPTY = WeightedRate(None, math.inf, 0, 0.0)


def _probabilities(inclusion: Sequence[float | None] | np.ndarray, size: int) -> np.ndarray:
    pi = np.array([1.0 if p is None else float(p) for p in inclusion], dtype=float)
    if pi.size != size:
        raise ValueError("one inclusion probability per judged turn")
    if np.any(~(pi > 0.0)) or np.any(pi > 1.0):
        raise ValueError("an inclusion probability must be in (0, 1]")
    return pi


def hajek(
    severe: Sequence[bool] | np.ndarray, inclusion: Sequence[float | None] | np.ndarray
) -> WeightedRate:
    """The weighted share of ``severe`` among all traffic the judged turns stand for."""
    y = np.asarray(severe, dtype=float)
    if y.size == 0:
        return EMPTY
    pi = _probabilities(inclusion, y.size)
    w = 1.0 / pi
    total = float(w.sum())
    p = float((w * y).sum() / total)
    var = float(((1.0 - pi) * (w * (y - p)) ** 2).sum()) / total**2
    se = math.sqrt(var) if y.size > 1 else math.inf
    return WeightedRate(p, se, int(y.size), total)


def rates(
    outcomes: Mapping[str, Sequence[bool]], inclusion: Sequence[float | None]
) -> dict[str, WeightedRate]:
    """``hajek`` for each named outcome (the turn's severe call, each metric's) of the same
    judged turns."""
    return {name: hajek(y, inclusion) for name, y in outcomes.items()}


@dataclass(frozen=True)
class Poststratified:
    rate: WeightedRate
    empty_cells: tuple[str, ...]  # cells with traffic and no judged turn


def poststratified(
    severe: Sequence[bool],
    inclusion: Sequence[float | None],
    cells: Sequence[str],
    traffic: Mapping[str, float],
) -> Poststratified:
    """sum_c (N_c / N) p_c over the cells of ``traffic`` (turns the cheap look saw per cell)."""
    y = np.asarray(severe, dtype=float)
    pi = _probabilities(inclusion, y.size)
    cell = np.asarray(list(cells), dtype=object)
    if cell.size != y.size:
        raise ValueError("one cell per judged turn")
    total = float(sum(traffic.values()))
    if total <= 0 or y.size == 0:
        return Poststratified(EMPTY, tuple(sorted(c for c, n in traffic.items() if n > 0)))
    overall = hajek(y, pi)
    point, var, empty = 0.0, 0.0, []
    for name, n in traffic.items():
        if n <= 0:
            continue
        share = n / total
        inside = cell == name
        if not inside.any():
            empty.append(name)
            point += share * (overall.point or 0.0)
            var += share**2 * overall.se**2 if math.isfinite(overall.se) else 0.0
            continue
        r = hajek(y[inside], pi[inside])
        point += share * (r.point or 0.0)
        var += share**2 * (r.se**2 if math.isfinite(r.se) else 0.25)
    se = math.sqrt(var) if y.size > 1 else math.inf
    return Poststratified(WeightedRate(point, se, int(y.size), total), tuple(sorted(empty)))
