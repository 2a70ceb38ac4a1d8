"""The one serializer of a stored detector, and the typed signals it names."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from monitor.stats.baseline_policy import Baseline
from monitor.stats.cusum_calibration import calibrate
from monitor.stats.detection import DEFAULT_SHIFTS
from monitor.stats.detection_signals import TURN_SEVERE, Signal, signals
from monitor.stats.detector_state import DetectorState

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def test_signals_are_typed_and_named_once() -> None:
    watched = signals(["hallucination", "identifier_integrity"])
    assert [s.name for s in watched] == [
        TURN_SEVERE,
        "hallucination_severe",
        "identifier_integrity_severe",
    ]
    for s in watched:
        assert Signal.from_name(s.name) == s
    assert Signal(None).severe(True, frozenset()) is True
    assert Signal("hallucination").severe(True, frozenset({"identifier_integrity"})) is False
    for bad in ("severe", "_severe", "turn", "hallucination"):
        with pytest.raises(ValueError, match="not a detector signal"):
            Signal.from_name(bad)


def _alarmed() -> DetectorState:
    state = DetectorState.new("canary", Signal(None), DEFAULT_SHIFTS)
    state.apply(Baseline(True, 0.05, "reference"))
    state.calibration = calibrate(
        0.05, DEFAULT_SHIFTS, false_alarm_days=30, rate_per_s=1.0, detectors=8
    )
    state.armed, state.turn_rate, state.calibrated_at = True, 1.0, NOW
    xs = [False] * 50 + [True] * 40
    raised = state.detector.update(
        xs, [NOW.timestamp() + i * 0.25 for i in range(90)], state.calibration
    )
    assert raised == 1
    state.alarm_at, state.observations = NOW, 90
    return state


def test_a_stored_row_reads_back_the_same() -> None:
    state = _alarmed()
    row = state.to_row(NOW)
    back = DetectorState.from_row(row, DEFAULT_SHIFTS)
    assert back.to_row(NOW) == row
    assert back.signal == Signal(None) and back.armed and back.frozen
    assert back.change_point is not None and back.change_point.tzinfo is not None
    # The command reads with the stored grid, whatever its own configuration says.
    assert DetectorState.from_row(row).to_row(NOW) == row


def test_a_row_for_another_grid_starts_afresh_and_unarmed() -> None:
    row = _alarmed().to_row(NOW)
    other = DetectorState.from_row(row, (2.0, 4.0))
    assert other.calibration is None and not other.armed
    assert other.detector.latched is None and other.detector.shifts == (2.0, 4.0)


def test_a_frozen_detector_keeps_its_baseline() -> None:
    state = _alarmed()
    state.apply(Baseline(False, None, "none"))
    assert state.baseline_rate == 0.05 and state.armed
    fresh = DetectorState.new("stable", Signal("hallucination"), DEFAULT_SHIFTS)
    fresh.apply(Baseline(True, 0.02, "pinned"))
    assert (fresh.baseline_rate, fresh.baseline_source) == (0.02, "pinned")
    fresh.apply(Baseline(False, None, "none"))
    assert fresh.baseline_rate is None and not fresh.armed
