"""The outcome detection job: what users said, every outcome event since the last run, into each
assistant's sequential detectors on the outcome signals.

Signals per assistant (``monitor.stats.detection_signals.outcome_signals``), one 0/1 observation
per outcome event, sampled turn or not (they cover every conversation): ``negative_feedback``
(per feedback with a polarity: was it negative), ``handoff`` (per case that ended, handed off or
resolved: was it handed to a person) and ``reopen`` (per resolution or reopening: was it a
reopening). Satisfaction scores observe nothing (``monitor.storage.outcome_detection_queries``
says what each kind observes). A duplicated or replayed event is one stored outcome, so one
observation.

Baselines, thresholds and alarms are the detection job's, with the detection section's settings
(shifts, false-alarm budget, reference window and gap, ``min_reference_turns`` counting outcomes
of the signal, pinned ``baselines`` under the outcome signal names): the reference rate is read
from the outcomes received in the reference window, and the thresholds are calibrated at the
live rate of each signal's outcomes. The run is ``monitor.jobs.signal_detection``'s (shared
with the case detectors); its CUSUMs count in the false-alarm budget of their own grid.

The state is stored beside the other detectors' (``detector_states``, the outcome signals'
rows) with the marks in ``outcome_observations``, in one transaction per run, fenced on the
job's lease: an outcome is observed once through restarts, a lease that moves, or a second run
beside it; what was stored before the first run is history (marked, not fed). The gauges are
the detection machinery's (``casewatch_detector_*{assistant, signal}``), so the
quality-regression alert and ``casewatch detect`` cover the outcome signals as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import ClassVar

from monitor.jobs.signal_detection import (
    Counts,
    Observation,
    Queries,
    StoreSignalDetection,
    StoreSource,
)
from monitor.stats.detection_signals import Signal, outcome_signals
from monitor.storage import outcome_detection_queries as q
from monitor.storage.detector_saves import LiveCounts

JOB_NAME = "outcome_detection"


class _Outcomes(StoreSource):
    """The stored outcome events as the detectors' source."""

    queries: ClassVar[Queries] = q

    def read_new(self, limit: int) -> list[Observation]:
        return [
            Observation(o.id, o.assistant, o.timestamp, o.values)
            for o in q.read_new(self._store, limit)
        ]

    def reference_counts(
        self, start: datetime, end: datetime, assistants: set[str] | None
    ) -> dict[str, dict[str, Counts]]:
        return {
            name: {s: Counts(c.n, c.x) for s, c in per.items()}
            for name, per in q.reference_counts(self._store, start, end, assistants).items()
        }

    def live_counts(
        self, since: datetime, recent_since: datetime
    ) -> dict[str, dict[str, LiveCounts]]:
        return q.live_counts(self._store, since, recent_since)


class OutcomeDetectionJob(StoreSignalDetection):
    JOB_NAME = JOB_NAME
    WHAT = "outcome"
    SOURCE = _Outcomes

    @staticmethod
    def signals() -> Sequence[Signal]:
        return outcome_signals()
