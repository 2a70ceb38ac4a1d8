"""Thresholds and run lengths of one-sided Bernoulli CUSUMs (the calibration of
``monitor.stats.detection``).

Calibration: the operator states the false-alarm rate as time (at most one false alarm per D
days for the whole deployment). With N CUSUMs running and r observations per second, each CUSUM
gets an in-control average run length ARL0 = N * D * 86400 * r observations (a union bound;
after an alarm a CUSUM restarts from zero, so its false alarms form a renewal process at rate
1/ARL0). The threshold h that gives that ARL0 is found by root finding on the ARL computed with
the Brook-Evans Markov chain (Brook & Evans 1972): the increments are put on an integer lattice
(the ratio LLR(1)/-LLR(0) approximated by a fraction, so the chain is that of the CUSUM up to a
relative error < 1e-4 in one increment) and ARL = (I - Q)^-1 1 is one sparse solve. Lorden's
bound h = ln(ARL0) is far more conservative; a test checks the chain against simulation.

The cost is bounded whatever the inputs: a chain is solved only up to ``_MAX_CHAIN_STATES``
states (the sparse solve's time and memory grow with them: ~0.3 s and ~30 MB at the bound). A
baseline so small (a clean metric over a long reference) or a target so long that the lattice
would need more falls back to Lorden's bound, which always holds (ARL0 >= e^h): such a detector
pages later than it could, never more often than allowed.
Thresholds are cached (``lru_cache``, bounded), so recalibrating every run costs a lookup.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

SECONDS_PER_DAY = 86400.0
# The lattice is fine enough that the thresholds agree to ~1e-3 with a 6x finer one (checked
# against simulation in the tests) and coarse enough that one threshold takes ~50 ms.
_MAX_DENOMINATOR = 100
_MAX_STATES = 10_000
# Past this many states (when even the coarsest lattice keeping the step ratio needs more) the
# threshold is Lorden's bound instead of the chain's.
_MAX_CHAIN_STATES = 40_000
# The threshold's root finding stops once ln ARL0 is within this of the target (0.2 % in ARL0).
_LOG_ARL_TOLERANCE = 2e-3
_MAX_SOLVES = 30


def shifted_rate(p0: float, shift: float) -> float:
    """p1 for a multiplicative shift, kept below 1: a 5x shift of p0 = 0.3 is not p1 = 1.5.

    When it is the smaller move, the shift divides the rate of "not severe" instead, so every
    p1 is a proper rate strictly between p0 and 1.
    """
    if not 0.0 < p0 < 1.0:
        raise ValueError(f"p0 must be in (0, 1), got {p0}")
    if shift <= 1.0:
        raise ValueError(f"a shift must be > 1, got {shift}")
    return min(p0 * shift, 1.0 - (1.0 - p0) / shift)


def increments(p0: float, p1: float) -> tuple[float, float]:
    """(LLR of a severe observation, LLR of a non-severe one) for p0 -> p1."""
    if not 0.0 < p0 < p1 < 1.0:
        raise ValueError(f"need 0 < p0 < p1 < 1, got p0={p0}, p1={p1}")
    return math.log(p1 / p0), math.log((1.0 - p1) / (1.0 - p0))


@dataclass(frozen=True)
class _Lattice:
    up: int  # lattice steps of a severe observation
    down: int  # lattice steps of a non-severe one (subtracted)
    unit: float  # LLR per lattice step


def _lattice(a: float, b: float, h: float) -> _Lattice:
    ratio = Fraction(a / -b).limit_denominator(_MAX_DENOMINATOR)
    up, down = ratio.numerator, ratio.denominator
    # Coarsen (keeping the ratio) while the chain would be too large.
    while down > 1 and h / (-b / down) > _MAX_STATES:
        ratio = Fraction(a / -b).limit_denominator(max(1, down // 2))
        up, down = ratio.numerator, ratio.denominator
    up = max(up, 1)
    return _Lattice(up, down, -b / down)


def _chain_fits(a: float, b: float, h: float) -> bool:
    """Whether the chain for threshold ``h`` stays within the work bound."""
    lat = _lattice(a, b, h)
    states = math.ceil(h / lat.unit - 1e-9)
    return states <= _MAX_CHAIN_STATES


def arl(p: float, p0: float, p1: float, h: float) -> float:
    """Average run length (observations) of the CUSUM for p0 -> p1 with threshold h, started
    at zero, when each observation is severe with probability ``p`` (Brook-Evans chain)."""
    # scipy on first use: `casewatch detect` reads stored thresholds and never computes one.
    import scipy.sparse as sp
    from scipy.sparse.linalg import spsolve

    a, b = increments(p0, p1)
    if h <= 0:
        return 1.0
    lat = _lattice(a, b, h)
    states = max(1, math.ceil(h / lat.unit - 1e-9))
    i = np.arange(states)
    up = i + lat.up
    down = np.maximum(i - lat.down, 0)
    keep = up < states  # an up-step at or over h is absorption (the alarm)
    rows = np.concatenate([i[keep], i])
    cols = np.concatenate([up[keep], down])
    vals = np.concatenate([np.full(int(keep.sum()), p), np.full(states, 1.0 - p)])
    q = sp.csc_matrix((vals, (rows, cols)), shape=(states, states))
    system = sp.identity(states, format="csc") - q
    run_lengths = spsolve(system, np.ones(states))
    return float(run_lengths[0])


def in_control_arl(p0: float, p1: float, h: float) -> float:
    return arl(p0, p0, p1, h)


@lru_cache(maxsize=4096)
def _threshold_cached(p0: float, p1: float, log_arl0: float) -> float:
    target = math.exp(log_arl0)
    a, b = increments(p0, p1)

    def gap(h: float) -> float:
        return math.log(in_control_arl(p0, p1, h)) - log_arl0

    hi = max(log_arl0, a)  # Lorden: ARL0 >= e^h, so h = ln(ARL0) is already enough
    if not _chain_fits(a, b, hi):
        return hi  # too large a chain to solve within the bound: Lorden's bound holds anyway
    if target <= 1.0:
        return hi / 16.0
    g_hi = gap(hi)
    while g_hi < 0:  # not expected (Lorden's bound), but never return a threshold that is short
        hi *= 1.5
        g_hi = gap(hi)
    # ln ARL0 grows with h at a slope close to 1 (ARL0 ~ e^h up to a constant, Siegmund), so
    # one step of that slope lands next to the root; regula falsi (Illinois) then closes in.
    # A threshold usually takes 3-5 chain solves instead of the 12-24 a blind bracket search took.
    lo = max(hi - g_hi - 0.5, hi / 16.0)
    g_lo = gap(lo)
    while g_lo > 0 and lo > 1e-6:
        lo /= 2.0
        g_lo = gap(lo)
    if g_lo > 0:
        return lo
    side = 0
    for _ in range(_MAX_SOLVES):
        h = hi - g_hi * (hi - lo) / (g_hi - g_lo)
        g = gap(h)
        if abs(g) < _LOG_ARL_TOLERANCE:
            return float(h)
        if g >= 0:
            hi, g_hi = h, g
            g_lo = g_lo / 2 if side > 0 else g_lo
            side = 1
        else:
            lo, g_lo = h, g
            g_hi = g_hi / 2 if side < 0 else g_hi
            side = -1
        if hi - lo < 1e-3:  # the lattice makes ARL0 a staircase in h: close enough
            break
    return float(hi)  # the side whose ARL0 is at least the target


def threshold(p0: float, p1: float, arl0: float) -> float:
    """The h whose in-control ARL is ``arl0`` observations (p0 and p1 are rounded to three
    significant digits and ARL0 to 1 % so a slowly moving baseline reuses the cached value)."""
    if arl0 <= 1.0:
        raise ValueError(f"arl0 must be > 1 observation, got {arl0}")
    return _threshold_cached(_round3(p0), _round3(p1), round(math.log(arl0), 2))


def _round3(x: float) -> float:
    return float(f"{x:.3g}")


def target_arl0(false_alarm_days: float, rate_per_s: float, detectors: int) -> float:
    """In-control ARL (observations) for each of ``detectors`` CUSUMs so that all of them
    together raise at most one false alarm per ``false_alarm_days`` (union bound)."""
    if false_alarm_days <= 0 or rate_per_s <= 0 or detectors < 1:
        raise ValueError("false_alarm_days and rate_per_s must be > 0 and detectors >= 1")
    return false_alarm_days * SECONDS_PER_DAY * rate_per_s * detectors


def expected_delay(p0: float, p1: float, h: float, p: float | None = None) -> float:
    """Expected observations to the alarm from a zero statistic when the true rate is ``p``
    (default p1): the zero-state ARL1, the figure an oracle CUSUM is measured by."""
    return arl(p1 if p is None else p, p0, p1, h)


@dataclass(frozen=True)
class Calibration:
    p0: float
    rates: tuple[float, ...]  # p1 per shift
    thresholds: tuple[float, ...]  # h per shift


def calibrate(
    p0: float,
    shifts: Sequence[float],
    *,
    false_alarm_days: float,
    rate_per_s: float,
    detectors: int,
) -> Calibration:
    """Thresholds for every shift of one detector; ``detectors`` counts every CUSUM of the
    deployment (assistants x signals x shifts)."""
    arl0 = target_arl0(false_alarm_days, rate_per_s, detectors)
    rates = tuple(shifted_rate(p0, c) for c in shifts)
    return Calibration(p0, rates, tuple(threshold(p0, p1, arl0) for p1 in rates))


def simulate_run_lengths(
    p: float, p0: float, p1: float, h: float, runs: int, rng: np.random.Generator
) -> np.ndarray:
    """Run lengths of ``runs`` independent CUSUMs (p0 -> p1, threshold h) on Bernoulli(p)
    streams, vectorised across runs. For tests and benchmarks of the calibration."""
    a, b = increments(p0, p1)
    s = np.zeros(runs)
    lengths = np.zeros(runs, dtype=np.int64)
    alive = np.ones(runs, dtype=bool)
    n = 0
    while alive.any():
        n += 1
        idx = np.flatnonzero(alive)
        x = rng.random(idx.size) < p
        s[idx] = np.maximum(0.0, s[idx] + np.where(x, a, b))
        done = idx[s[idx] >= h]
        lengths[done] = n
        alive[done] = False
    return lengths
