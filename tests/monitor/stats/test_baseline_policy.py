"""The detectors' baseline and calibration-rate policy (pure): what arms a detector, which rate
its thresholds assume, and when reference counts are read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from monitor.stats.baseline_policy import (
    BURST_WINDOW_S,
    MIN_RATE_PER_S,
    NOT_ARMED,
    RATE_STEP,
    RATE_WINDOW_S,
    Baseline,
    calibration_rate,
    choose_baseline,
    measured_rate,
    reference_refresh_due,
)

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def test_a_pinned_rate_arms_at_once_whatever_the_reference() -> None:
    assert choose_baseline(0.03, 0, 0, 500) == Baseline(True, 0.03, "pinned")
    assert choose_baseline(0.03, 5000, 900, 500) == Baseline(True, 0.03, "pinned")


def test_the_reference_arms_once_it_holds_enough_turns() -> None:
    assert choose_baseline(None, 499, 20, 500) == NOT_ARMED
    armed = choose_baseline(None, 500, 20, 500)
    assert armed.armed and armed.source == "reference"
    assert armed.rate == pytest.approx(20.5 / 501)
    # A clean reference still has a positive rate (a CUSUM needs p0 > 0).
    clean = choose_baseline(None, 1000, 0, 500)
    assert clean.rate is not None and 0 < clean.rate < 0.001


def test_unarmed_detectors_are_rechecked_every_run_the_rest_every_refresh() -> None:
    assert reference_refresh_due(None, NOW, 600, any_unarmed=False) == "all"
    recent = NOW - timedelta(seconds=30)
    assert reference_refresh_due(recent, NOW, 600, any_unarmed=True) == "unarmed"
    assert reference_refresh_due(recent, NOW, 600, any_unarmed=False) == "none"
    old = NOW - timedelta(seconds=600)
    assert reference_refresh_due(old, NOW, 600, any_unarmed=True) == "all"


def test_the_measured_rate_takes_the_larger_of_the_window_and_the_burst() -> None:
    first = NOW - timedelta(seconds=RATE_WINDOW_S)
    assert measured_rate(600, first, 60, NOW) == pytest.approx(1.0)
    # A burst in the last minute shows at once.
    assert measured_rate(600 + 1800, first, 1800, NOW) == pytest.approx(1800 / BURST_WINDOW_S)
    # A stream younger than the window is measured over its own age (at least a minute).
    young = NOW - timedelta(seconds=120)
    assert measured_rate(240, young, 120, NOW) == pytest.approx(2.0)
    assert measured_rate(0, None, 0, NOW) == 0.0


def test_the_calibration_rate_is_on_the_grid_and_never_below_the_measured_one() -> None:
    for measured in (0.01, 0.7, 1.0, 3.3, 29.0, 1000.0):
        rate = calibration_rate(None, measured)
        assert measured <= rate < measured * RATE_STEP * (1 + 1e-9)
    assert calibration_rate(None, 0.0) >= MIN_RATE_PER_S


def test_the_calibration_rate_goes_up_at_once_and_down_only_once_halved() -> None:
    rate = calibration_rate(None, 1.0)
    assert calibration_rate(rate, 30.0) >= 30.0  # 30x faster: at once
    fast = calibration_rate(rate, 30.0)
    assert calibration_rate(fast, 20.0) == fast  # slower, not yet halved: kept
    assert calibration_rate(fast, 0.9 * fast / 2) < fast  # halved: down
    # A rate wavering around one value does not recalibrate run after run.
    wavering = {calibration_rate(rate, m) for m in (0.9, 1.1, 0.95, 1.05, 1.0)}
    assert len(wavering) <= 2
