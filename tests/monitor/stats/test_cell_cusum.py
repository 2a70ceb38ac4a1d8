"""The cell-conditional CUSUM: the Bernoulli CUSUM again with one cell, its calibration held by
simulation, and alarms on a rise."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from monitor.stats import cusum_calibration as bernoulli
from monitor.stats.cell_cusum import (
    CellCalibration,
    CellCusum,
    CellModel,
    arl,
    calibrate_cells,
    cell_alternative,
    cell_baseline,
    stratum,
    threshold,
)
from monitor.stats.detection import Detector
from monitor.stats.detection_signals import Signal
from monitor.stats.detector_state import DetectorState


def test_one_cell_is_the_bernoulli_cusum() -> None:
    model = CellModel({"all": 0.05}, {"all": 1.0}, 0.05)
    assert model.increments(0.15)["all"] == pytest.approx(bernoulli.increments(0.05, 0.15))
    h = threshold(model, 0.15, 5000)
    assert h == pytest.approx(bernoulli.threshold(0.05, 0.15, 5000), rel=0.02)


def test_cells_move_with_the_population_rate() -> None:
    assert cell_alternative(0.05, 0.05, 0.15) == pytest.approx(0.15)
    risky, clean = cell_alternative(0.4, 0.05, 0.15), cell_alternative(0.01, 0.05, 0.15)
    assert risky > 0.4 and clean > 0.01
    with pytest.raises(ValueError):
        cell_alternative(0.0, 0.05, 0.15)


def test_simulated_false_alarms_stay_within_the_calibrated_run_length() -> None:
    rates = {"risky": 0.35, "clean": 0.01}
    mix = {"risky": 0.6, "clean": 0.4}
    model = CellModel(rates, mix, 0.05)
    h = threshold(model, 0.15, 2000)
    assert arl(model, 0.15, h) >= 2000 * 0.99
    incs = model.increments(0.15)
    rng = np.random.default_rng(3)
    runs, s = 400, np.zeros(400)
    first = np.zeros(400)
    for t in range(1, 40_000):
        risky = rng.random(runs) < mix["risky"]
        p = np.where(risky, rates["risky"], rates["clean"])
        y = rng.random(runs) < p
        up = np.where(risky, incs["risky"][0], incs["clean"][0])
        down = np.where(risky, incs["risky"][1], incs["clean"][1])
        s = np.where(first > 0, s, np.maximum(0.0, s + np.where(y, up, down)))
        first[(s >= h) & (first == 0)] = t
        if (first > 0).all():
            break
    assert (first > 0).all()
    assert first.mean() > 2000 * 0.85  # the simulated ARL0 meets the target (sampling noise)


def test_a_rise_alarms_and_restarts() -> None:
    model = CellModel({"risky": 0.3, "clean": 0.02}, {"risky": 0.5, "clean": 0.5}, 0.05)
    det = CellCusum(model.increments(0.15), h=3.0)
    alarms = det.update(["risky"] * 40, [True] * 40)
    assert alarms and det.s < 3.0
    assert det.update(["unknown"], [True]) == []  # a cell the model does not know adds nothing


def test_a_cell_baseline_is_read_high_and_checked() -> None:
    assert cell_baseline(5, 100) > 5.5 / 101
    assert 0 < cell_baseline(0, 0) < 1
    with pytest.raises(ValueError):
        cell_baseline(3, 2)


RATES = {"severe@1": 0.35, "moderate": 0.09, "minor": 0.03, "none": 0.01}
MIX = {"severe@1": 0.45, "moderate": 0.35, "minor": 0.12, "none": 0.08}
SHIFTS = (1.5, 2.0, 3.0, 5.0)


def _calibration() -> CellCalibration:
    return calibrate_cells(
        0.05, RATES, MIX, SHIFTS, false_alarm_days=1.0, rate_per_s=0.05, detectors=8
    )


def test_the_stored_detector_runs_the_cell_conditional_cusums() -> None:
    cal = _calibration()
    arl0 = bernoulli.target_arl0(1.0, 0.05, 8)
    model = CellModel(cal.cells, cal.mix, cal.p0)
    assert cal.thresholds[0] == pytest.approx(threshold(model, cal.rates[0], arl0), rel=0.01)
    assert cal.rates == tuple(bernoulli.shifted_rate(0.05, k) for k in SHIFTS)
    rng = np.random.default_rng(4)
    cells = list(rng.choice(sorted(RATES), size=3000))
    severe = [bool(rng.random() < RATES[c] * 2.5) for c in cells]
    detector = Detector(SHIFTS)
    raised = detector.update_steps(
        severe, list(range(3000)), cal.steps(cells, severe), cal.thresholds
    )
    # Each shift's CUSUM is cell_cusum's CellCusum until the first alarm.
    first = CellCusum(model.increments(cal.rates[1]), cal.thresholds[1])
    alarms = first.update(cells, severe)
    assert raised >= 1 and detector.latched is not None
    assert alarms, "a 2.5x rise in every cell raises the 2x CUSUM"


def test_the_rate_since_the_change_is_weighted() -> None:
    cal = _calibration()
    detector = Detector(SHIFTS)
    # Severe turns of the risky stratum (drawn at 1) page; then clean turns of the clean one,
    # each standing for 50 turns of traffic (too few to clear the alarm).
    cells = ["severe@1"] * 40 + ["none"] * 10
    severe = [True] * 40 + [False] * 10
    weights = [1.0] * 40 + [50.0] * 10
    detector.update_steps(
        severe, list(range(50)), cal.steps(cells, severe), cal.thresholds, weights
    )
    latched = detector.latched
    assert latched is not None and latched.observations_since >= 10
    unweighted = latched.severe_since / latched.observations_since
    assert latched.rate_since == pytest.approx(latched.weighted_severe_since / latched.weight_since)
    assert latched.rate_since < unweighted / 2


def test_a_cell_calibration_survives_the_store_and_a_strategy_change_starts_afresh() -> None:
    state = DetectorState.new("helpdesk", Signal(None), SHIFTS)
    state.calibration, state.armed, state.baseline_rate = _calibration(), True, 0.05
    state.detector.states[0].s = 1.5
    row = state.to_row(datetime.now(UTC))
    back = DetectorState.from_row(row, SHIFTS, cells=True)
    assert back.calibration == state.calibration and back.armed
    assert back.detector.states[0].s == 1.5
    assert DetectorState.from_row(row).calibration == state.calibration  # reading: as stored
    uniform = DetectorState.from_row(row, SHIFTS, cells=False)
    assert uniform.calibration is None and not uniform.armed
    assert uniform.detector.states[0].s == 0.0


def test_rule_turns_are_a_stratum_of_their_own() -> None:
    assert stratum("none", 0.02) == "none"
    assert stratum("none", 1.0) == "none@1"
