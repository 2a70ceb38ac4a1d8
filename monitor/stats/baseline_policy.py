"""Which baseline a detector watches against, and for which judged-turn rate its thresholds hold.

Pure decisions of the detection job (``monitor.jobs.detection``), tested directly.

The baseline p0 of one (assistant, signal):

- pinned (``detection.baselines``): armed at once, whatever the history; the operator knows
  the healthy rate;
- else the reference window's severe rate, once it holds ``min_reference_turns`` judged turns,
  estimated as (severe + 1/2) / (turns + 1) so a clean reference still has a positive rate;
- else not armed: no baseline, never "no regression".

The calibration rate. The false-alarm budget is in time (one false page per
``false_alarm_days``), but a CUSUM's run length is in observations, so thresholds are set for a
judged-turn rate: the rate the detector is fed now, not the reference window's. The live rate is
measured over the last ``RATE_WINDOW_S`` and over the last ``BURST_WINDOW_S`` (the larger wins,
so a burst raises it within one job run); it is rounded UP to a grid of ``RATE_STEP`` (so a
slowly moving rate reuses cached thresholds and the rate the thresholds assume is never below
the one measured) and only comes down once it has halved (so a rate that wavers does not
recalibrate every run). A faster stream gets higher thresholds and keeps its budget in days.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

BaselineSource = Literal["pinned", "reference", "none"]

RATE_WINDOW_S = 600.0  # the live rate's window
BURST_WINDOW_S = 60.0  # and the short one that catches a burst
MIN_SPAN_S = 60.0  # a window younger than this is measured as this long
MIN_RATE_PER_S = 1.0 / 3600.0  # the rate assumed for an assistant with no recent turn
RATE_STEP = 2.0**0.5  # the calibration rates' grid (41 % apart: few recalibrations)
DOWN_FACTOR = 2.0  # the rate comes down only once the measured one has halved


@dataclass(frozen=True)
class Baseline:
    armed: bool
    rate: float | None  # p0
    source: BaselineSource


NOT_ARMED = Baseline(False, None, "none")


def choose_baseline(
    pinned: float | None, reference_turns: int, reference_severe: int, min_reference_turns: int
) -> Baseline:
    """The baseline of one (assistant, signal) from its pinned rate and reference counts."""
    if pinned is not None:
        return Baseline(True, pinned, "pinned")
    if reference_turns < min_reference_turns or reference_turns <= 0:
        return NOT_ARMED
    return Baseline(True, (reference_severe + 0.5) / (reference_turns + 1), "reference")


def reference_refresh_due(
    refreshed_at: datetime | None, now: datetime, every_s: float, *, any_unarmed: bool
) -> Literal["all", "unarmed", "none"]:
    """Which reference counts a run reads: every assistant's when the last full refresh is
    ``every_s`` old (or there was none in this process), else only the assistants with a
    detector not armed yet, on every run (their reference holds fewer than
    ``min_reference_turns`` turns, so reading it is cheap), else none."""
    if refreshed_at is None or now - refreshed_at >= timedelta(seconds=every_s):
        return "all"
    return "unarmed" if any_unarmed else "none"


def measured_rate(turns: int, first_at: datetime | None, recent_turns: int, now: datetime) -> float:
    """Judged turns per second now: ``turns`` in the last ``RATE_WINDOW_S`` (the first at
    ``first_at``) and ``recent_turns`` in the last ``BURST_WINDOW_S``; the larger rate."""
    if turns <= 0 or first_at is None:
        return 0.0
    span = min(RATE_WINDOW_S, max((now - first_at).total_seconds(), MIN_SPAN_S))
    return max(turns / span, recent_turns / BURST_WINDOW_S)


def _grid_up(rate: float) -> float:
    k = math.ceil(math.log(rate) / math.log(RATE_STEP) - 1e-9)
    return float(RATE_STEP**k)


def calibration_rate(current: float | None, measured: float) -> float:
    """The judged-turn rate thresholds are set for, given the one they were set for and the
    rate measured now: up at once, down only once halved, always on the grid."""
    target = _grid_up(max(measured, MIN_RATE_PER_S))
    if current is None or target > current * (1 + 1e-9):
        return target
    if target * DOWN_FACTOR <= current * (1 + 1e-9):
        return target
    return current
