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

from collections.abc import Hashable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from monitor.config.detection import DetectionConfig
from monitor.jobs.recorders import DetectionRecorder
from monitor.jobs.signal_detection import Counts, Observation, SignalDetection
from monitor.runtime.clock import Clock
from monitor.stats.detection_signals import outcome_signals
from monitor.storage import outcome_detection_queries as q
from monitor.storage.detector_saves import Cursor, LiveCounts
from monitor.storage.leases import Fence
from monitor.storage.store import Store

JOB_NAME = "outcome_detection"


class _Outcomes:
    """The stored outcome events as the detectors' source."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def read_cursor(self) -> Cursor:
        return q.read_cursor(self._store)

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

    def save(
        self,
        states: Iterable[Mapping[str, Any]],
        cursor: Cursor,
        observed: Sequence[Hashable],
        now: datetime,
        *,
        history: bool,
        fence: Fence | None,
    ) -> Cursor:
        ids = cast(Sequence[str], observed)
        return q.save(self._store, states, cursor, ids, now, history=history, fence=fence)


class OutcomeDetectionJob(SignalDetection):
    def __init__(
        self,
        config: DetectionConfig,
        store: Store,
        gauges: DetectionRecorder | None,
        *,
        clock: Clock | None = None,
        lease_owner: str | None = None,
        read_limit: int = q.READ_LIMIT,
    ) -> None:
        super().__init__(
            JOB_NAME,
            "outcome",
            config,
            outcome_signals(),
            _Outcomes(store),
            store,
            gauges,
            clock=clock,
            lease_owner=lease_owner,
            read_limit=read_limit,
        )
