"""Sequential detection of a rate regression: one-sided Bernoulli CUSUMs over a grid of shifts.

Each observation is 0/1 ("this judged turn is severe", or "this metric is severe"). For one
shift p0 -> p1 the CUSUM is S_n = max(0, S_{n-1} + LLR(x_n)) with the log-likelihood ratio
LLR(1) = ln(p1/p0), LLR(0) = ln((1-p1)/(1-p0)), and it alarms when S_n >= h (Page 1954; optimal
in Lorden's minimax sense for that p1). The size of a regression is not known, so a detector
runs one CUSUM per shift of a grid (p1 = 1.5, 2, 3, 5 x p0 by default) and alarms when any does:
a 2x and a 5x regression each meet the CUSUM tuned for them.

The change point is estimated as the last time the alarming CUSUM's statistic left zero (the
CUSUM's maximum-likelihood change point), and the observed rate since then is reported with it.
Thresholds come from ``monitor.stats.cusum_calibration``. Pure logic: no I/O, no clock; the
job (``monitor.jobs.detection``) feeds it and persists it.

The same detector runs the cell-conditional CUSUMs of ``monitor.stats.cell_cusum`` (turns drawn
by the cascade's cheap look): ``update_steps`` takes each CUSUM's increments per observation
(the Bernoulli ones are ``np.where(severe, a, b)``; the cell-conditional ones depend on the
turn's cell too) and each observation's weight, 1/pi under the cascade, so the rate since the
change point is the traffic's (Hajek), not the draw's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from monitor.stats.cell_cusum import CellCalibration
from monitor.stats.cusum_calibration import Calibration, increments

DEFAULT_SHIFTS: tuple[float, ...] = (1.5, 2.0, 3.0, 5.0)


@dataclass
class ShiftState:
    """One CUSUM of the grid. ``zero_at`` is the time of the last observation after which the
    statistic was zero; ``n_since``/``x_since`` count observations (and severe ones) since."""

    shift: float
    s: float = 0.0
    zero_at: float | None = None
    n_since: int = 0
    x_since: int = 0
    # The same, weighted (1/pi under the cascade; 0.0: no weights fed, the counts stand).
    w_since: float = 0.0
    wx_since: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "shift": self.shift,
            "s": self.s,
            "zero_at": self.zero_at,
            "n_since": self.n_since,
            "x_since": self.x_since,
            "w_since": self.w_since,
            "wx_since": self.wx_since,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ShiftState:
        return cls(
            shift=float(d["shift"]),
            s=float(d["s"]),
            zero_at=None if d.get("zero_at") is None else float(d["zero_at"]),
            n_since=int(d.get("n_since", 0)),
            x_since=int(d.get("x_since", 0)),
            w_since=float(d.get("w_since", 0.0)),
            wx_since=float(d.get("wx_since", 0.0)),
        )

    def restart(self, at: float) -> None:
        self.zero_at, self.n_since, self.x_since = at, 0, 0
        self.w_since = self.wx_since = 0.0


@dataclass
class Alarm:
    shift: float
    change_point: float | None  # time the alarming statistic last left zero
    observations_since: int
    severe_since: int
    weight_since: float = 0.0  # sum of the observations' weights since (0.0: unweighted)
    weighted_severe_since: float = 0.0

    @property
    def rate_since(self) -> float | None:
        """The severe rate since the change point: weighted (Hajek) when weights were fed."""
        if self.weight_since > 0:
            return self.weighted_severe_since / self.weight_since
        if self.observations_since == 0:
            return None
        return self.severe_since / self.observations_since

    @classmethod
    def fired_by(cls, state: ShiftState) -> Alarm:
        """The alarm a CUSUM of the grid raises: its excursion's start and counts since."""
        return cls(
            state.shift, state.zero_at, state.n_since, state.x_since, state.w_since, state.wx_since
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "shift": self.shift,
            "change_point": self.change_point,
            "observations_since": self.observations_since,
            "severe_since": self.severe_since,
            "weight_since": self.weight_since,
            "weighted_severe_since": self.weighted_severe_since,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Alarm:
        return cls(
            float(d["shift"]),
            None if d.get("change_point") is None else float(d["change_point"]),
            int(d["observations_since"]),
            int(d["severe_since"]),
            float(d.get("weight_since", 0.0)),
            float(d.get("weighted_severe_since", 0.0)),
        )


@dataclass
class Detector:
    """Parallel CUSUMs over a grid of shifts for one (assistant, signal).

    After an alarm every CUSUM restarts from zero (so the renewal argument of the calibration
    holds) and the detector is *latched*: it stays in alarm (one page) until a CUSUM for the
    reverse change (the alarming p1 back to p0) with the same threshold finds the rate has
    returned. While latched, the change point stays that of the first alarm and the rate since
    it counts every observation after it.
    """

    shifts: tuple[float, ...]
    states: list[ShiftState] = field(default_factory=list)
    latched: Alarm | None = None
    recovery: float = 0.0  # reverse CUSUM statistic while latched

    def __post_init__(self) -> None:
        if not self.states:
            self.states = [ShiftState(c) for c in self.shifts]
        if [s.shift for s in self.states] != list(self.shifts):
            raise ValueError("detector state does not match the configured shifts")

    def statistic(self, cal: Calibration) -> float:
        """max over shifts of S / h: 1.0 is the threshold."""
        return max(s.s / h for s, h in zip(self.states, cal.thresholds, strict=True))

    def update(self, severe: Sequence[bool], times: Sequence[float], cal: Calibration) -> int:
        """Feed observations in order; returns how many alarms were raised (pages: an alarm
        while latched is not a new one).

        Vectorised (a benchmark feeds it millions of observations): between two events (an
        alarm, or the latch clearing) each CUSUM is Lindley's recursion in closed form,
        S_n = W_n - min(0, min_k<=n W_k) with W the running sum of increments from S_0.
        ``update_reference`` is the observation-by-observation definition it must match.
        """
        if isinstance(cal, CellCalibration):
            raise ValueError("a cell-conditional calibration: feed it with update_steps")
        x = np.asarray(severe, dtype=bool)
        steps = [np.where(x, a, b) for a, b in (increments(cal.p0, p1) for p1 in cal.rates)]
        return self.update_steps(severe, times, steps, cal.thresholds)

    def update_steps(
        self,
        severe: Sequence[bool],
        times: Sequence[float],
        steps: Sequence[np.ndarray],
        thresholds: Sequence[float],
        weights: Sequence[float] | None = None,
    ) -> int:
        """``update`` with each CUSUM's increment per observation given (``steps[k]`` for the
        k-th shift, one per observation) and, optionally, each observation's weight (the rate
        since the change point is then weighted). The reverse CUSUM of a latched alarm adds the
        opposite increments, the likelihood ratio of the change undone."""
        x_all = np.asarray(severe, dtype=bool)
        t_all = np.asarray(times, dtype=float)
        if x_all.shape != t_all.shape:
            raise ValueError("severe and times must have the same length")
        if len(steps) != len(self.states) or len(thresholds) != len(self.states):
            raise ValueError("one increment array and one threshold per shift")
        steps_all = [np.asarray(s, dtype=float) for s in steps]
        if any(s.shape != x_all.shape for s in steps_all):
            raise ValueError("one increment per observation")
        w_all = None if weights is None else np.asarray(weights, dtype=float)
        if w_all is not None and w_all.shape != x_all.shape:
            raise ValueError("one weight per observation")
        raised = 0
        start = 0
        while start < x_all.size:
            stop = min(x_all.size, start + _CHUNK)
            x, t = x_all[start:stop], t_all[start:stop]
            w = None if w_all is None else w_all[start:stop]
            incs = [s[start:stop] for s in steps_all]
            paths = [_lindley(st.s, inc) for st, inc in zip(self.states, incs, strict=True)]
            ends = [_first(path >= h) for path, h in zip(paths, thresholds, strict=True)]
            fire_at = min(ends)
            clear_at = x.size
            rec_path = None
            if self.latched is not None:
                i = self.shifts.index(self.latched.shift)
                rec_path = _lindley(self.recovery, -incs[i])
                clear_at = _first(rec_path >= thresholds[i])
            e = min(fire_at, clear_at, x.size - 1)
            seg = e + 1
            ws = None if w is None else w[:seg]
            for st, path in zip(self.states, paths, strict=True):
                _advance(st, path[:seg], x[:seg], t[:seg], ws)
            if self.latched is not None and rec_path is not None:
                self.latched.observations_since += seg
                self.latched.severe_since += int(x[:seg].sum())
                if ws is not None:
                    self.latched.weight_since += float(ws.sum())
                    self.latched.weighted_severe_since += float(ws[x[:seg]].sum())
                self.recovery = float(rec_path[e])
                if clear_at == e:
                    self.latched, self.recovery = None, 0.0
            if fire_at == e:
                ratios = [st.s / h for st, h in zip(self.states, thresholds, strict=True)]
                fired = self.states[max(range(len(ratios)), key=ratios.__getitem__)]
                if self.latched is None:
                    raised += 1
                    self.latched = Alarm.fired_by(fired)
                self.recovery = 0.0
                for st in self.states:
                    st.s = 0.0
                    st.restart(float(t[e]))
            start += seg
        return raised

    def update_reference(
        self, severe: Sequence[bool], times: Sequence[float], cal: Calibration
    ) -> int:
        """``update``, one observation at a time: the definition (for tests)."""
        raised = 0
        incs = [increments(cal.p0, p1) for p1 in cal.rates]
        for x, t in zip(severe, times, strict=True):
            fired: ShiftState | None = None
            best = 0.0
            for st, (a, b), h in zip(self.states, incs, cal.thresholds, strict=True):
                if st.s == 0.0:
                    st.zero_at, st.n_since, st.x_since = t, 0, 0
                st.s = max(0.0, st.s + (a if x else b))
                st.n_since += 1
                st.x_since += int(x)
                if st.s >= h and st.s / h > best:
                    fired, best = st, st.s / h
                if st.s == 0.0:
                    st.zero_at, st.n_since, st.x_since = t, 0, 0
            if self.latched is not None:
                self.latched.observations_since += 1
                self.latched.severe_since += int(x)
                self._recover(x, cal)
            if fired is not None:
                if self.latched is None:
                    raised += 1
                    self.latched = Alarm.fired_by(fired)
                self.recovery = 0.0
                for st in self.states:
                    st.s, st.zero_at, st.n_since, st.x_since = 0.0, t, 0, 0
        return raised

    def _recover(self, x: bool, cal: Calibration) -> None:
        if self.latched is None:
            return
        i = self.shifts.index(self.latched.shift)
        a, b = increments(cal.p0, cal.rates[i])
        self.recovery = max(0.0, self.recovery - (a if x else b))
        if self.recovery >= cal.thresholds[i]:
            self.latched, self.recovery = None, 0.0

    def to_dict(self) -> dict[str, Any]:
        latched = self.latched
        return {
            "states": [s.to_dict() for s in self.states],
            "recovery": self.recovery,
            "latched": None if latched is None else latched.to_dict(),
        }

    @classmethod
    def from_dict(cls, shifts: Sequence[float], d: dict[str, Any] | None) -> Detector:
        """A detector from its persisted state; a state for other shifts starts afresh."""
        shifts = tuple(shifts)
        if not d:
            return cls(shifts)
        states = [ShiftState.from_dict(s) for s in d.get("states", [])]
        if [s.shift for s in states] != list(shifts):
            return cls(shifts)
        raw = d.get("latched")
        latched = None
        if raw is not None and float(raw["shift"]) in shifts:
            latched = Alarm.from_dict(raw)
        return cls(shifts, states, latched, float(d.get("recovery", 0.0)))


# Observations per vectorised step: the running sums stay small enough that the closed form
# agrees with the recursion to ~1e-9.
_CHUNK = 65_536


def _lindley(s0: float, inc: np.ndarray) -> np.ndarray:
    """S_n = max(0, S_{n-1} + inc_n) from S_0 = s0, in closed form."""
    w = s0 + np.cumsum(inc)
    return np.asarray(w - np.minimum(np.minimum.accumulate(w), 0.0))


def _first(mask: np.ndarray) -> int:
    hits = np.flatnonzero(mask)
    return int(hits[0]) if hits.size else int(mask.size)


def _advance(
    st: ShiftState, path: np.ndarray, x: np.ndarray, t: np.ndarray, w: np.ndarray | None = None
) -> None:
    """A shift's state after ``path`` (its statistic after each of observations x at t, of
    weights w: None, unweighted)."""

    def weighed(since: int) -> tuple[float, float]:
        if w is None:
            return 0.0, 0.0
        tail, hit = w[since:], x[since:]
        return float(tail.sum()), float(tail[hit].sum())

    zeros = np.flatnonzero(path == 0.0)
    if zeros.size:
        z = int(zeros[-1])
        if z == path.size - 1:
            st.restart(float(t[z]))
        else:
            st.zero_at = float(t[z + 1])
            st.n_since, st.x_since = path.size - 1 - z, int(x[z + 1 :].sum())
            st.w_since, st.wx_since = weighed(z + 1)
    elif st.s == 0.0:  # the excursion starts with this batch
        st.zero_at, st.n_since, st.x_since = float(t[0]), path.size, int(x.sum())
        st.w_since, st.wx_since = weighed(0)
    else:
        st.n_since += path.size
        st.x_since += int(x.sum())
        dw, dwx = weighed(0)
        st.w_since += dw
        st.wx_since += dwx
    st.s = float(path[-1])
