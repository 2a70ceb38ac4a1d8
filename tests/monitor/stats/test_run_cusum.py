"""The per-run CUSUM of the judge canary: a run's increment is the sum of its calls'
increments in any order, the calibration meets the false-alarm budget (checked against
simulation of the same CUSUM), and the detector latches per run and survives a round trip."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from monitor.stats.cusum_calibration import increments, target_arl0
from monitor.stats.detection import Detector
from monitor.stats.run_cusum import (
    RunDetector,
    calibrate_runs,
    run_arl,
    run_increment,
    run_threshold,
)

SHIFTS = (1.5, 2.0, 3.0)
P0 = 18.5 / 73  # 6 of 24 severe on three baseline runs, with the half call added


def test_a_runs_increment_is_its_calls_increments_summed_in_any_order() -> None:
    a, b = increments(P0, 2 * P0)
    calls = [True] * 3 + [False] * 5
    totals = {
        round(math.fsum(a if x else b for x in order), 12)
        for order in itertools.permutations(calls)
    }
    assert totals == {round(run_increment(3, 8, P0, 2 * P0), 12)}


def _simulated_arl(p: float, p1: float, h: float, turns: int, reps: int) -> float:
    """Run lengths of the per-run CUSUM on binomial counts, vectorised across reps."""
    rng = np.random.default_rng(7)
    s = np.zeros(reps)
    lengths = np.zeros(reps)
    alive = np.ones(reps, dtype=bool)
    n = 0
    while alive.any():
        n += 1
        idx = np.flatnonzero(alive)
        k = rng.binomial(turns, p, idx.size)
        s[idx] = np.maximum(0.0, s[idx] + k * math.log(p1 / P0)
                            + (turns - k) * math.log((1 - p1) / (1 - P0)))  # fmt: skip
        done = idx[s[idx] >= h]
        lengths[done] = n
        alive[done] = False
    return float(lengths.mean())


def test_the_threshold_meets_the_budget_and_the_chain_agrees_with_simulation() -> None:
    arl0 = target_arl0(30.0, 1 / 3600.0, 6)  # hourly runs, 2 judges x 3 shifts, 30 days
    p1 = 2 * P0
    h = run_threshold(P0, p1, arl0, 24)
    assert h < math.log(arl0)  # tighter than Lorden's bound, which the chain improves on
    chain = run_arl(P0, P0, p1, h, 24)
    assert chain >= arl0 * 0.99  # never more false alarms than the budget
    # The smallest such threshold: counts of severe calls make the ARL a staircase in h (here
    # it jumps from about 2,700 to 6,900 runs), and just below the step the budget is missed.
    assert run_arl(P0, P0, p1, h - 0.01, 24) < arl0
    simulated = _simulated_arl(P0, p1, h, 24, 4000)
    assert simulated == pytest.approx(chain, rel=0.1)
    delay = run_arl(0.5, P0, p1, h, 24)  # 12 of 24 severe: the calls doubled
    assert delay == pytest.approx(_simulated_arl(0.5, p1, h, 24, 4000), rel=0.05)
    assert delay < 4


def test_a_chain_too_large_to_solve_falls_back_to_lordens_bound() -> None:
    arl0 = 1e12
    h = run_threshold(0.001, 0.0015, arl0, 1000)
    assert h == pytest.approx(math.log(arl0), rel=0.01)


def _cal() -> object:
    return calibrate_runs(
        P0, SHIFTS, turns=24, false_alarm_days=30.0, interval_seconds=3600.0, detectors=6
    )


def test_the_alarm_is_decided_per_run_and_held_until_the_calls_return() -> None:
    cal = calibrate_runs(
        P0, SHIFTS, turns=24, false_alarm_days=30.0, interval_seconds=3600.0, detectors=6
    )
    detector = RunDetector(SHIFTS)
    for t in range(5):
        assert not detector.update(6, 24, float(t), cal)
    raised = [detector.update(12, 24, float(10 + t), cal) for t in range(4)]
    assert raised.count(True) == 1 and raised.index(True) <= 2
    assert detector.latched is not None and detector.latched.change_point == 10.0
    assert detector.latched.severe_since >= 12
    copy = RunDetector.from_dict(SHIFTS, detector.to_dict())
    assert copy == detector
    for t in range(40):  # back to 6 of 24: the reverse test clears the latch
        detector.update(6, 24, float(20 + t), cal)
        if detector.latched is None:
            break
    assert detector.latched is None


def test_a_state_left_by_the_per_call_detector_keeps_its_alarm_and_restarts_the_statistics() -> (
    None
):
    cal = calibrate_runs(
        P0, SHIFTS, turns=24, false_alarm_days=30.0, interval_seconds=3600.0, detectors=6
    )
    old = Detector(SHIFTS)
    old.update([True] * 30, [float(i) for i in range(30)], cal)
    assert old.latched is not None
    restored = RunDetector.from_dict(SHIFTS, old.to_dict())
    assert restored.latched == old.latched
    assert [s.s for s in restored.states] == [0.0, 0.0, 0.0]
