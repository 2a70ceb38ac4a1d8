"""The sequential detector of a severe-rate rise over turns drawn by the cheap look (pure; numpy,
scipy on first calibration).

Turns reach the LLM judge with probabilities that depend on the cheap look's cell, so the
judged stream over-represents the cells where severe turns live: a plain Bernoulli CUSUM with
the population's p0 would alarm at once. The detector conditions on the cell instead. With
p0_c = P(severe | cell c) in control, and a rise of the population's rate p0 -> p1 that keeps
what the cheap look sees of a severe (and of a clean) turn (P(c | severe), P(c | clean) fixed),
each cell's rate moves to

    p1_c = p1 p0_c / p0  /  (p1 p0_c / p0 + (1 - p1) (1 - p0_c) / (1 - p0))

and a judged turn in cell c adds the log-likelihood ratio ln(p1_c / p0_c) when severe, else
ln((1 - p1_c) / (1 - p0_c)). Whether a turn was drawn depends on its cell alone, never on its
LLM verdict, so conditionally on the cell these increments are exact likelihood ratios whatever
the inclusion probabilities were, and they may change every hour (a budget change, a
recalibration) without breaking the false-alarm bound. With one cell (or a useless cheap look,
every p0_c = p0) it is the Bernoulli CUSUM of ``monitor.stats.detection`` again.

Calibration to the same false-alarm budget as the Bernoulli CUSUM: an in-control ARL of
``cusum_calibration.target_arl0`` judged observations (the false-alarm days, the rate of judged
turns, the number of detectors), solved on a Brook-Evans chain whose increments are the mixture
over cells (each cell weighted by its share of judged turns) put on a lattice (each increment split
between the two lattice points around it so that its mean is kept).

The detection job runs it under the cascade through the stored detector
(``monitor.stats.detection``'s ``Detector.update_steps``): ``calibrate_cells`` gives one
detector's ``CellCalibration`` (a CUSUM per shift of the grid, p1 = ``shifted_rate(p0, shift)``
of the population's baseline, each cell's in-control rate from the reference window), and
``CellCalibration.steps`` the increments of a batch of judged turns.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from monitor.stats.cusum_calibration import Calibration, shifted_rate, target_arl0

_STEPS_PER_SMALLEST = 3  # lattice units in the smallest increment
_MAX_STATES = 3_000
_SOLVES = 40


def cell_alternative(p0_cell: float, p0: float, p1: float) -> float:
    """p1_c: cell c's severe rate once the population's rate is p1 (see the module doc)."""
    if not 0.0 < p0 < p1 < 1.0:
        raise ValueError(f"need 0 < p0 < p1 < 1, got {p0}, {p1}")
    if not 0.0 < p0_cell < 1.0:
        raise ValueError(f"a cell's rate must be in (0, 1), got {p0_cell}")
    up = p1 * p0_cell / p0
    down = (1.0 - p1) * (1.0 - p0_cell) / (1.0 - p0)
    return up / (up + down)


@dataclass(frozen=True)
class CellModel:
    """In-control severe rate per cell, and each cell's share of the judged turns (for the
    calibration only: the increments do not depend on it)."""

    rates: Mapping[str, float]
    judged_mix: Mapping[str, float]
    p0: float  # the population's in-control rate (the traffic-weighted mean of the rates)

    def increments(self, p1: float) -> dict[str, tuple[float, float]]:
        """Per cell: (increment of a severe turn, increment of a clean one)."""
        out = {}
        for cell, rate in self.rates.items():
            q = cell_alternative(rate, self.p0, p1)
            out[cell] = (math.log(q / rate), math.log((1.0 - q) / (1.0 - rate)))
        return out


def arl(
    model: CellModel, p1: float, h: float, *, truth: Mapping[str, float] | None = None
) -> float:
    """Average run length in judged observations from a zero statistic, when cell c's turns
    are severe with probability ``truth[c]`` (default: the in-control rates)."""
    import scipy.sparse as sp
    from scipy.sparse.linalg import spsolve

    if h <= 0:
        return 1.0
    truth = model.rates if truth is None else truth
    incs = model.increments(p1)
    total_mix = sum(model.judged_mix.get(c, 0.0) for c in incs)
    if total_mix <= 0:
        raise ValueError("no cell has judged turns to calibrate on")
    atoms: list[tuple[float, float]] = []  # (probability, increment)
    for cell, (a, b) in incs.items():
        m = model.judged_mix.get(cell, 0.0) / total_mix
        if m <= 0:
            continue
        atoms += [(m * truth[cell], a), (m * (1.0 - truth[cell]), b)]
    smallest = min(abs(inc) for _, inc in atoms if inc != 0.0)
    unit = max(smallest / _STEPS_PER_SMALLEST, h / _MAX_STATES)
    states = max(1, math.ceil(h / unit - 1e-9))
    i = np.arange(states)
    rows, cols, vals = [], [], []
    for prob, inc in atoms:
        if prob <= 0:
            continue
        # Mean-preserving rounding: the atom's probability is split between the two lattice
        # points around it so that the expected increment is the true one.
        steps = inc / unit
        low = math.floor(steps)
        frac = steps - low
        for k, share in ((low, 1.0 - frac), (low + 1, frac)):
            if share <= 0:
                continue
            nxt = np.maximum(i + k, 0)
            keep = nxt < states  # at or over h: the alarm (absorbed)
            rows.append(i[keep])
            cols.append(nxt[keep])
            vals.append(np.full(int(keep.sum()), prob * share))
    q = sp.csc_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(states, states),
    )
    system = sp.identity(states, format="csc") - q
    return float(spsolve(system, np.ones(states))[0])


def threshold(model: CellModel, p1: float, arl0: float) -> float:
    """The h whose in-control ARL is ``arl0`` judged observations (at least: the side above)."""
    if arl0 <= 1.0:
        raise ValueError(f"arl0 must be > 1 observation, got {arl0}")
    target = math.log(arl0)
    lo, hi = 0.0, max(target, 1.0)
    while math.log(arl(model, p1, hi)) < target:
        hi *= 1.5
    for _ in range(_SOLVES):
        mid = (lo + hi) / 2.0
        if math.log(arl(model, p1, mid)) < target:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-3 * hi:
            break
    return hi


@dataclass
class CellCusum:
    """One CUSUM over judged turns and their cells; restarts from zero after an alarm."""

    increments: Mapping[str, tuple[float, float]]
    h: float
    s: float = 0.0

    def update(self, cells: Sequence[str], severe: Sequence[bool]) -> list[int]:
        """Feed judged turns in order; the positions at which it alarmed. A cell the model
        does not know adds nothing (ValueError would stop the job for one odd row)."""
        alarms = []
        for k, (cell, x) in enumerate(zip(cells, severe, strict=True)):
            inc = self.increments.get(cell)
            if inc is None:
                continue
            self.s = max(0.0, self.s + (inc[0] if x else inc[1]))
            if self.s >= self.h:
                alarms.append(k)
                self.s = 0.0
        return alarms


BASELINE_Z = 0.84  # one-sided 80 %: a cell's baseline is read high rather than low


def cell_baseline(severe: int, judged: int, *, z: float = BASELINE_Z) -> float:
    """A cell's in-control rate from its reference window, read at the upper end of a
    one-sided interval: a baseline read low makes every severe turn of the cell a large step
    (false alarms), one read high only delays the page a little. Cells with few judged turns
    (the ones the cascade rarely draws) would otherwise carry most of the false alarms."""
    if judged < 0 or not 0 <= severe <= judged:
        raise ValueError(f"need 0 <= severe <= judged, got {severe}/{judged}")
    p = (severe + 0.5) / (judged + 1.0)
    return min(0.99, p + z * math.sqrt(p * (1.0 - p) / (judged + 1.0)))


@dataclass(frozen=True)
class CellCalibration(Calibration):
    """One detector's cell-conditional CUSUMs: ``p0`` the population's baseline, ``rates`` the
    p1 of each shift and ``thresholds`` their h (as ``Calibration``'s), ``cells`` each cell's
    in-control rate and ``mix`` each cell's share of the judged turns the thresholds were
    solved for. Its increments depend on the cell: ``steps``, never ``Calibration``'s."""

    cells: Mapping[str, float]
    mix: Mapping[str, float]

    def knows(self, cell: str) -> bool:
        return cell in self.cells

    def steps(self, cells: Sequence[str], severe: Sequence[bool]) -> list[np.ndarray]:
        """Per shift, each judged turn's increment (every cell known: ``knows``)."""
        x = np.asarray(severe, dtype=bool)
        model = CellModel(self.cells, self.mix, self.p0)
        out = []
        for p1 in self.rates:
            incs = model.increments(p1)
            up = np.array([incs[c][0] for c in cells], dtype=float)
            down = np.array([incs[c][1] for c in cells], dtype=float)
            out.append(np.where(x, up, down))
        return out


def calibrate_cells(
    p0: float,
    cells: Mapping[str, float],
    mix: Mapping[str, float],
    shifts: Sequence[float],
    *,
    false_alarm_days: float,
    rate_per_s: float,
    detectors: int,
) -> CellCalibration:
    """Thresholds for every shift of one cell-conditional detector, for the same false-alarm
    budget as ``cusum_calibration.calibrate`` (an in-control ARL of ``target_arl0`` judged
    turns each, ``detectors`` counting every CUSUM of the deployment). The cells' rates are
    rounded up to two significant digits (a baseline read a little high: never more false
    alarms), the mix to 0.02 and ARL0 to 1 %, so a slowly moving baseline reuses its cached
    thresholds; the increments are those of the rounded rates, so the calibration holds
    for exactly the CUSUM that runs."""
    arl0 = target_arl0(false_alarm_days, rate_per_s, detectors)
    if not 0.0 < p0 < 1.0:
        raise ValueError(f"p0 must be in (0, 1), got {p0}")
    rounded = tuple(sorted((c, _round_up2(r)) for c, r in cells.items()))
    total = sum(max(0.0, mix.get(c, 0.0)) for c in cells)
    if total <= 0:
        raise ValueError("no cell has judged turns to calibrate on")
    shares = tuple(sorted((c, _round_to(max(0.0, mix.get(c, 0.0)) / total, 0.02)) for c in cells))
    rates = tuple(shifted_rate(_round3(p0), k) for k in shifts)
    log_arl0 = round(math.log(arl0), 2)
    thresholds = tuple(_cell_threshold(rounded, shares, _round3(p0), p1, log_arl0) for p1 in rates)
    return CellCalibration(_round3(p0), rates, thresholds, dict(rounded), dict(shares))


@lru_cache(maxsize=1024)
def _cell_threshold(
    cells: tuple[tuple[str, float], ...],
    mix: tuple[tuple[str, float], ...],
    p0: float,
    p1: float,
    log_arl0: float,
) -> float:
    """``threshold``'s h, found in fewer chain solves: ln ARL0 grows with h at a slope close
    to 1, so a step of that slope from Lorden's h = ln ARL0 lands next to the root, and
    regula falsi (Illinois) closes in; the side whose ARL0 is at least the target is kept."""
    model = CellModel(dict(cells), dict(mix), p0)

    def gap(h: float) -> float:
        return math.log(arl(model, p1, h)) - log_arl0

    hi = max(log_arl0, 1e-3)
    g_hi = gap(hi)
    while g_hi < 0:
        hi *= 1.5
        g_hi = gap(hi)
    lo = max(hi - g_hi - 0.5, hi / 16.0)
    g_lo = gap(lo)
    while g_lo > 0 and lo > 1e-6:
        hi, g_hi = lo, g_lo
        lo /= 2.0
        g_lo = gap(lo)
    if g_lo > 0:
        return lo
    side = 0
    for _ in range(_SOLVES):
        if abs(g_hi) < _LOG_ARL_TOLERANCE or hi - lo < 1e-3 * hi:
            break
        h = hi - g_hi * (hi - lo) / (g_hi - g_lo)
        g = gap(h)
        if g >= 0:
            hi, g_hi = h, g
            g_lo = g_lo / 2 if side > 0 else g_lo
            side = 1
        else:
            lo, g_lo = h, g
            g_hi = g_hi / 2 if side < 0 else g_hi
            side = -1
    return hi


_LOG_ARL_TOLERANCE = 2e-3  # ln ARL0 within this of the target (0.2 % in ARL0)


def _round3(x: float) -> float:
    return float(f"{x:.3g}")


def _round_up2(x: float) -> float:
    """``x`` rounded up to two significant digits, kept below 1."""
    if x <= 0.0:
        return x
    scale = 10.0 ** (math.floor(math.log10(x)) - 1)
    return min(0.99, float(f"{math.ceil(x / scale - 1e-9) * scale:.2g}"))


def _round_to(x: float, step: float) -> float:
    return float(f"{round(x / step) * step:.4g}")


CERTAIN = "@1"  # the suffix of a cell's turns drawn with probability 1


def stratum(cell: str, probability: float) -> str:
    """The stratum a drawn turn is conditioned on: its cheap-look cell, apart for the turns
    drawn with probability 1 (an always-judge rule, the tripwire, or a cell at probability 1).
    A rule picks turns by what they hold, not by their cell, so its turns may be severe more
    often than their cell's others; kept apart, every stratum's turns are drawn independently
    of their LLM call."""
    return f"{cell}{CERTAIN}" if probability >= 1.0 else cell
