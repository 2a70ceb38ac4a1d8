"""Bernoulli CUSUM detectors: increments, calibration against simulation, alarm and latch."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from monitor.stats.cusum_calibration import (
    Calibration,
    arl,
    calibrate,
    expected_delay,
    in_control_arl,
    increments,
    shifted_rate,
    simulate_run_lengths,
    target_arl0,
    threshold,
)
from monitor.stats.detection import DEFAULT_SHIFTS, Detector


def test_increments_are_the_log_likelihood_ratios() -> None:
    a, b = increments(0.05, 0.10)
    assert a == pytest.approx(math.log(2.0))
    assert b == pytest.approx(math.log(0.90 / 0.95))
    # In control the expected increment is -KL(p0 || p1) < 0; after the shift +KL(p1 || p0) > 0.
    assert 0.05 * a + 0.95 * b == pytest.approx(-stats.entropy([0.05, 0.95], [0.10, 0.90]))
    assert 0.10 * a + 0.90 * b == pytest.approx(stats.entropy([0.10, 0.90], [0.05, 0.95]))


def test_increments_reject_a_non_increase() -> None:
    with pytest.raises(ValueError, match="p0 < p1"):
        increments(0.1, 0.1)


def test_shifted_rate_stays_a_probability() -> None:
    assert shifted_rate(0.05, 2.0) == pytest.approx(0.10)
    for p0 in (0.2, 0.3, 0.6, 0.9):
        for c in DEFAULT_SHIFTS:
            assert p0 < shifted_rate(p0, c) < 1.0


@pytest.mark.parametrize(
    ("p0", "shift", "h"), [(0.05, 1.5, 3.0), (0.05, 5.0, 4.0), (0.2, 2.0, 3.5)]
)
def test_brook_evans_arl_matches_simulation(p0: float, shift: float, h: float) -> None:
    p1 = shifted_rate(p0, shift)
    runs = simulate_run_lengths(p0, p0, p1, h, 3000, np.random.default_rng(11))
    se = runs.std(ddof=1) / math.sqrt(runs.size)
    computed = in_control_arl(p0, p1, h)
    assert abs(computed - runs.mean()) < 4 * se
    # Out of control too (the delay an oracle is measured by).
    delays = simulate_run_lengths(p1, p0, p1, h, 3000, np.random.default_rng(12))
    se1 = delays.std(ddof=1) / math.sqrt(delays.size)
    assert abs(expected_delay(p0, p1, h) - delays.mean()) < 4 * se1


def test_threshold_hits_the_target_arl_and_is_below_lordens_bound() -> None:
    arl0 = 20_000.0
    h = threshold(0.05, 0.10, arl0)
    assert in_control_arl(0.05, 0.10, h) == pytest.approx(arl0, rel=0.01)
    assert h < math.log(arl0)


def test_calibrated_threshold_against_simulation() -> None:
    # A target small enough to simulate: the simulated false-alarm rate matches the target.
    arl0 = 5_000.0
    h = threshold(0.05, 0.15, arl0)
    runs = simulate_run_lengths(0.05, 0.05, 0.15, h, 2000, np.random.default_rng(3))
    lo, hi = stats.t.interval(0.999, runs.size - 1, runs.mean(), stats.sem(runs))
    assert lo < arl0 < hi


def test_target_arl0_is_a_union_bound() -> None:
    one = target_arl0(30, 2.0, 1)
    assert one == 30 * 86400 * 2.0
    assert target_arl0(30, 2.0, 16) == 16 * one
    with pytest.raises(ValueError):
        target_arl0(30, 0.0, 1)


def test_more_detectors_raise_every_threshold() -> None:
    few = calibrate(0.05, DEFAULT_SHIFTS, false_alarm_days=30, rate_per_s=1, detectors=4)
    many = calibrate(0.05, DEFAULT_SHIFTS, false_alarm_days=30, rate_per_s=1, detectors=64)
    assert all(m > f for m, f in zip(many.thresholds, few.thresholds, strict=True))


def _cal(h: float = 4.0) -> Calibration:
    rates = tuple(shifted_rate(0.05, c) for c in DEFAULT_SHIFTS)
    return Calibration(0.05, rates, (h,) * len(rates))


def test_detector_statistic_is_the_largest_fraction_of_a_threshold() -> None:
    det = Detector(DEFAULT_SHIFTS)
    cal = _cal()
    det.update([True], [1.0], cal)
    expect = max(math.log(p1 / 0.05) / 4.0 for p1 in cal.rates)
    assert det.statistic(cal) == pytest.approx(expect)
    det.update([False] * 10_000, [2.0] * 10_000, cal)
    assert det.statistic(cal) == 0.0


def test_alarm_records_the_change_point_and_rate_and_latches_once() -> None:
    cal = calibrate(0.05, DEFAULT_SHIFTS, false_alarm_days=30, rate_per_s=1, detectors=4)
    rng = np.random.default_rng(5)
    det = Detector(DEFAULT_SHIFTS)
    before = list(rng.random(2000) < 0.05)
    assert not det.update(before, [float(i) for i in range(2000)], cal)
    after = list(rng.random(3000) < 0.4)
    times = [float(2000 + i) for i in range(3000)]
    raised = [det.update([x], [t], cal) for x, t in zip(after, times, strict=True)]
    assert sum(raised) == 1  # one page for one regression, however long it lasts
    assert det.latched is not None
    first = raised.index(True) + 2000
    assert det.latched.change_point is not None
    assert det.latched.rate_since is not None and det.latched.rate_since > 0.2
    # The estimate is near the true change point (2000) and never after the alarm.
    assert 1900 <= det.latched.change_point <= first
    # The rate returns: the latch clears, and a second regression pages again.
    det.update(list(rng.random(20_000) < 0.05), [6000.0] * 20_000, cal)
    assert det.latched is None
    again = [det.update([x], [30_000.0], cal) for x in rng.random(3000) < 0.4]
    assert sum(again) == 1


def test_state_round_trips_and_a_new_grid_starts_afresh() -> None:
    cal = _cal()
    det = Detector(DEFAULT_SHIFTS)
    det.update([True, True, False], [1.0, 2.0, 3.0], cal)
    back = Detector.from_dict(DEFAULT_SHIFTS, det.to_dict())
    assert back.to_dict() == det.to_dict()
    fresh = Detector.from_dict((2.0, 4.0), det.to_dict())
    assert fresh.statistic(Calibration(0.05, (0.1, 0.2), (1.0, 1.0))) == 0.0


def test_arl_rejects_nothing_silently() -> None:
    assert arl(0.05, 0.05, 0.1, 0.0) == 1.0
    with pytest.raises(ValueError):
        threshold(0.05, 0.1, 0.5)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_vectorised_update_matches_the_observation_by_observation_definition(seed: int) -> None:
    # Low thresholds, so alarms, latches and recoveries all happen many times in the stream.
    rng = np.random.default_rng(seed)
    rates = tuple(shifted_rate(0.05, c) for c in DEFAULT_SHIFTS)
    cal = Calibration(0.05, rates, (2.5, 3.0, 3.5, 2.0))
    p = np.repeat(rng.choice([0.03, 0.05, 0.15, 0.4], size=40), 500)
    xs = list(rng.random(p.size) < p)
    ts = [float(i) for i in range(p.size)]
    fast, slow = Detector(DEFAULT_SHIFTS), Detector(DEFAULT_SHIFTS)
    raised_fast = raised_slow = 0
    for lo in range(0, p.size, 777):  # uneven batches, as the job reads them
        raised_fast += fast.update(xs[lo : lo + 777], ts[lo : lo + 777], cal)
        raised_slow += slow.update_reference(xs[lo : lo + 777], ts[lo : lo + 777], cal)
        a, b = fast.to_dict(), slow.to_dict()
        assert a["latched"] == b["latched"]
        for sa_, sb in zip(a["states"], b["states"], strict=True):
            assert sa_["s"] == pytest.approx(sb["s"], abs=1e-9)
            assert (sa_["zero_at"], sa_["n_since"], sa_["x_since"]) == (
                sb["zero_at"],
                sb["n_since"],
                sb["x_since"],
            )
        assert a["recovery"] == pytest.approx(b["recovery"], abs=1e-9)
    assert raised_fast == raised_slow >= 3


def test_a_chain_too_large_to_solve_falls_back_to_lordens_bound() -> None:
    # A tiny baseline (a clean metric over a long reference) and the longest budget at a high
    # rate: the lattice would need millions of states. The threshold is then Lorden's
    # h = ln(ARL0), which always holds (ARL0 >= e^h): later pages, never more.
    arl0 = target_arl0(3650, 1000.0, 8 * 4)
    p0 = 0.5 / 1_000_001
    h = threshold(p0, shifted_rate(p0, 1.5), arl0)
    assert h == pytest.approx(math.log(arl0), rel=1e-2)
    cal = calibrate(p0, DEFAULT_SHIFTS, false_alarm_days=3650, rate_per_s=1000.0, detectors=32)
    assert all(t > 0 for t in cal.thresholds)
    # An ordinary case still gets the chain's (tighter) threshold.
    assert threshold(0.05, 0.1, arl0) < math.log(arl0) - 0.5
