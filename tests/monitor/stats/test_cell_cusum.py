"""The cell-conditional CUSUM: the Bernoulli CUSUM again with one cell, its calibration held by
simulation, and alarms on a rise."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.stats import cusum_calibration as bernoulli
from monitor.stats.cell_cusum import (
    CellCusum,
    CellModel,
    arl,
    cell_alternative,
    cell_baseline,
    threshold,
)


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
