"""A CUSUM with one observation per run: the count of severe calls in a run of n judged turns
(the judge canary's test). Pure logic: no I/O, no clock.

Why not one observation per call, as the assistant detectors do: a canary run is one batch of
the same fixed turns, judged in whatever order its file lists them. Fed call by call, the
statistic's path inside a run depends on that order: with the severe turns first, a judge whose
severe calls doubled raises the alarm on the run's severe calls and the reverse test clears it
again on the clean ones that follow, so the run ends with no alarm. Fed the run's count k of n,
the statistic moves once per run by the log-likelihood ratio of the whole run,

    LLR(k) = k ln(p1/p0) + (n - k) ln((1 - p1)/(1 - p0)),

which is the sum of the per-call increments in any order, and the alarm is decided between
runs only. This is Page's CUSUM on the binomial observations k_1, k_2, ..., so it keeps its
optimality for that data (Lorden's minimax sense, per shift) and the same renewal calibration:
thresholds come from the Brook-Evans chain of this CUSUM (``run_threshold``), with binomial
jumps on the same integer lattice as ``monitor.stats.cusum_calibration``, so the false-alarm
budget in days is met as exactly as the assistant detectors meet theirs.

The binomial model treats a run's n calls as independent with one rate p0. A canary's turns are
fixed, so in truth each turn has a rate of its own and the count is Poisson-binomial with the
same mean: its moment generating function is at most the binomial's (Hoeffding 1956), so the
CUSUM's upward excursions are no more likely than calibrated: a stable judge raises fewer false
alarms than budgeted, never more (a deterministic judge, the same calls every run, raises none).

After an alarm every CUSUM restarts and the detector stays latched (one alarm) until a reverse
CUSUM for the alarming p1 back to p0, with the same threshold, finds the judge's calls have
returned; that too is decided per run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from monitor.stats.cusum_calibration import Calibration, increments, shifted_rate, target_arl0
from monitor.stats.detection import Alarm, ShiftState

# The chain's transition matrix holds (states x (n + 1)) entries: bounded so one solve stays
# around 0.1 s; past it the lattice is coarsened, and past the coarsest lattice the threshold
# is Lorden's bound, which always holds (ARL0 >= e^h) and only pages later.
_MAX_ENTRIES = 2_000_000
_MAX_DENOMINATOR = 100
# Thresholds closer than this are the same step of the ARL's staircase, as near as matters.
_H_TOLERANCE = 1e-3
# How far above a step's edge its end is looked for (a wider step: its middle is taken as this
# far over the edge's half).
_STEP_SEARCH = 1.0
_MAX_SOLVES = 40


def run_increment(severe: int, turns: int, p0: float, p1: float) -> float:
    """The run's log-likelihood ratio for p0 -> p1: ``severe`` of ``turns`` calls severe."""
    if not 0 <= severe <= turns:
        raise ValueError(f"need 0 <= severe <= turns, got {severe} of {turns}")
    a, b = increments(p0, p1)
    return severe * a + (turns - severe) * b


@dataclass(frozen=True)
class _Lattice:
    up: int  # lattice steps of one severe call
    down: int  # lattice steps of one clean call (subtracted)
    states: int  # lattice points below the threshold


def _lattice(a: float, b: float, h: float, turns: int) -> _Lattice | None:
    """The finest lattice (ratio up/down close to a/-b) whose chain fits ``_MAX_ENTRIES``."""
    max_states = _MAX_ENTRIES // (turns + 1)
    denominator = _MAX_DENOMINATOR
    while True:
        ratio = Fraction(a / -b).limit_denominator(denominator)
        up, down = max(ratio.numerator, 1), ratio.denominator
        states = max(1, math.ceil(h / (-b / down) - 1e-9))
        if states <= max_states:
            return _Lattice(up, down, states)
        if denominator == 1:
            return None
        denominator = max(1, denominator // 2)


def run_arl(p: float, p0: float, p1: float, h: float, turns: int) -> float:
    """Average run length, in runs, of the per-run CUSUM for p0 -> p1 with threshold ``h``,
    started at zero, when each of a run's ``turns`` calls is severe with probability ``p``;
    ``inf`` when the chain would be too large to solve (callers fall back to Lorden's bound)."""
    import scipy.sparse as sp
    from scipy.sparse.linalg import spsolve
    from scipy.stats import binom

    if h <= 0:
        return 1.0
    a, b = increments(p0, p1)
    lat = _lattice(a, b, h, turns)
    if lat is None:
        return math.inf
    k = np.arange(turns + 1)
    steps = k * lat.up - (turns - k) * lat.down
    probs = binom.pmf(k, turns, p)
    i = np.arange(lat.states)
    dest = i[:, None] + steps[None, :]
    keep = dest < lat.states  # at or over the threshold: the alarm (absorbed)
    rows = np.broadcast_to(i[:, None], dest.shape)[keep]
    cols = np.maximum(dest, 0)[keep]
    vals = np.broadcast_to(probs[None, :], dest.shape)[keep]
    q = sp.csc_matrix((vals, (rows, cols)), shape=(lat.states, lat.states))  # sums duplicates
    system = sp.identity(lat.states, format="csc") - q
    return float(spsolve(system, np.ones(lat.states))[0])


@lru_cache(maxsize=1024)
def _threshold_cached(p0: float, p1: float, log_arl0: float, turns: int) -> float:
    a, _ = increments(p0, p1)
    # Lorden: ARL0 >= e^h for any CUSUM of log-likelihood ratios, so ln(ARL0) always suffices.
    hi = max(log_arl0, a)

    def gap(h: float) -> float:
        return math.log(run_arl(p0, p0, p1, h, turns)) - log_arl0

    g_hi = gap(hi)
    if math.isinf(g_hi):
        return hi  # the chain is too large to solve: Lorden's bound
    while g_hi < 0:  # only the lattice's rounding could cause it; never return a short h
        hi *= 1.5
        g_hi = gap(hi)
        if math.isinf(g_hi):
            return hi
    # ln ARL0 grows with h at a slope close to 1, so the root is near hi - g_hi. Counts of
    # severe calls make ARL0 a staircase in h with steps of tens of percent: bisection (not
    # regula falsi, which stalls on a flat step) finds the lowest step that meets the target.
    lo = max(hi - g_hi - 1.0, hi / 64.0)
    g_lo = gap(lo)
    while g_lo >= 0 and lo > 1e-6:
        lo /= 2.0
        g_lo = gap(lo)
    if g_lo >= 0:
        return lo
    for _ in range(_MAX_SOLVES):
        if hi - lo < _H_TOLERANCE:
            break
        mid = (lo + hi) / 2.0
        g = gap(mid)
        if math.isinf(g):
            return hi
        if g >= 0:
            hi = mid
        else:
            lo = mid
    return _middle_of_step(hi, lambda h: run_arl(p0, p0, p1, h, turns))


def _middle_of_step(edge: float, arl: Callable[[float], float]) -> float:
    """The middle of the step of the ARL's staircase that starts at ``edge``.

    At the edge itself, the lattice's rounding of the increments (a relative 1e-4 a call) can
    put the true CUSUM on the step below, whose ARL can be a third shorter than the target; in
    the middle it cannot. Within a step the reachable sums of increments, and so both the
    in-control and the out-of-control ARL, do not change: the middle costs no delay."""
    level = arl(edge)
    lo, hi = edge, edge + _STEP_SEARCH
    if math.isclose(arl(hi), level, rel_tol=1e-9):
        return edge + _STEP_SEARCH / 2
    for _ in range(_MAX_SOLVES):
        if hi - lo < _H_TOLERANCE:
            break
        mid = (lo + hi) / 2.0
        if math.isclose(arl(mid), level, rel_tol=1e-9):
            lo = mid
        else:
            hi = mid
    return (edge + lo) / 2.0


def run_threshold(p0: float, p1: float, arl0_runs: float, turns: int) -> float:
    """The lowest h whose in-control ARL is at least ``arl0_runs`` runs of ``turns`` calls.

    Unlike the per-call thresholds, p0 and p1 are not rounded for the cache: counts make the
    ARL a staircase in h, and a step moves with p0, so a threshold for a rounded p0 could sit
    below the step the true p0 needs (a canary calibrates once per baseline anyway). The
    target is rounded up to 1 %."""
    if arl0_runs <= 1.0:
        raise ValueError(f"arl0 must be > 1 run, got {arl0_runs}")
    if turns < 1:
        raise ValueError(f"a run has at least one turn, got {turns}")
    return _threshold_cached(p0, p1, math.ceil(math.log(arl0_runs) * 100) / 100, turns)


def calibrate_runs(
    p0: float,
    shifts: tuple[float, ...] | list[float],
    *,
    turns: int,
    false_alarm_days: float,
    interval_seconds: float,
    detectors: int,
) -> Calibration:
    """Thresholds for one per-run detector: all ``detectors`` CUSUMs (judges x shifts) together
    raise at most one false alarm per ``false_alarm_days``, one observation per interval."""
    arl0 = target_arl0(false_alarm_days, 1.0 / interval_seconds, detectors)
    rates = tuple(shifted_rate(p0, c) for c in shifts)
    return Calibration(p0, rates, tuple(run_threshold(p0, p1, arl0, turns) for p1 in rates))


@dataclass
class RunDetector:
    """Per-run CUSUMs over a grid of shifts for one judge's canary (stored in the shape of
    ``monitor.stats.detection.Detector``'s state, counts in calls)."""

    shifts: tuple[float, ...]
    states: list[ShiftState] = field(default_factory=list)
    latched: Alarm | None = None
    recovery: float = 0.0

    def __post_init__(self) -> None:
        if not self.states:
            self.states = [ShiftState(c) for c in self.shifts]
        if [s.shift for s in self.states] != list(self.shifts):
            raise ValueError("detector state does not match the configured shifts")

    def statistic(self, cal: Calibration) -> float:
        """max over shifts of S / h: 1.0 is the threshold."""
        return max(s.s / h for s, h in zip(self.states, cal.thresholds, strict=True))

    def update(self, severe: int, turns: int, at: float, cal: Calibration) -> bool:
        """Feed one run (``severe`` of ``turns`` calls); True when it raised the alarm (an
        alarm while latched is not a new one)."""
        fired: ShiftState | None = None
        best = 0.0
        for st, p1, h in zip(self.states, cal.rates, cal.thresholds, strict=True):
            if st.s == 0.0:
                st.zero_at, st.n_since, st.x_since = at, 0, 0
            st.s = max(0.0, st.s + run_increment(severe, turns, cal.p0, p1))
            st.n_since += turns
            st.x_since += severe
            if st.s >= h and st.s / h > best:
                fired, best = st, st.s / h
            if st.s == 0.0:
                st.zero_at, st.n_since, st.x_since = at, 0, 0
        if self.latched is not None:
            self.latched.observations_since += turns
            self.latched.severe_since += severe
            i = self.shifts.index(self.latched.shift)
            llr = run_increment(severe, turns, cal.p0, cal.rates[i])
            self.recovery = max(0.0, self.recovery - llr)
            if self.recovery >= cal.thresholds[i]:
                self.latched, self.recovery = None, 0.0
        raised = False
        if fired is not None:
            if self.latched is None:
                raised = True
                self.latched = Alarm.fired_by(fired)
            self.recovery = 0.0
            for st in self.states:
                st.s, st.zero_at, st.n_since, st.x_since = 0.0, at, 0, 0
        return raised

    def to_dict(self) -> dict[str, Any]:
        latched = self.latched
        return {
            "per": "run",
            "states": [s.to_dict() for s in self.states],
            "recovery": self.recovery,
            "latched": None if latched is None else latched.to_dict(),
        }

    @classmethod
    def from_dict(cls, shifts: tuple[float, ...], d: dict[str, Any] | None) -> RunDetector:
        """A detector from its stored state. The statistics of a state for other shifts, or of
        one a per-call detector left (on another scale), start afresh; an alarm it held stays."""
        if not d:
            return cls(shifts)
        raw = d.get("latched")
        latched = None
        if raw is not None and float(raw["shift"]) in shifts:
            latched = Alarm.from_dict(raw)
        if d.get("per") != "run":
            return cls(shifts, latched=latched)
        states = [ShiftState.from_dict(s) for s in d.get("states", [])]
        if [s.shift for s in states] != list(shifts):
            return cls(shifts, latched=latched)
        return cls(shifts, states, latched, float(d.get("recovery", 0.0)))
