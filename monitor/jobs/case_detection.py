"""The case detection job: every case verdict since the last run into each assistant's
sequential detectors on case signals, the way the detection job feeds turns.

Signals per assistant (``monitor.stats.detection_signals.case_signals``): ``case_severe`` (the
case band is severe) and ``case_unresolved`` (the case judge found the case unresolved), one
0/1 observation per ok case verdict (a resumed case judged again is observed again;
``judge_failed`` verdicts are marked read but not observed). Baselines, thresholds and alarms
follow the detection job exactly, with the detection section's settings (shifts, false-alarm
budget, reference window and gap, ``min_reference_turns`` counting case verdicts, pinned
``baselines`` under the case signal names): the reference rate is read from the case verdicts
judged in the reference window, and the thresholds are calibrated at the live rate of case
verdicts. The CUSUMs of this job count in the false-alarm budget of their own grid (the union
bound over its armed CUSUMs): together with the turn detectors the deployment's budget is at
most doubled, and the docs say so. The run itself is ``monitor.jobs.signal_detection``'s,
shared with the outcome detectors.

The state is stored beside the turn detectors' (``detector_states``, the case signals' rows)
with the marks in ``case_verdict_observations`` (``monitor.storage.case_detection_queries``),
in one transaction per run, fenced on the job's lease: a verdict is observed once through
restarts, a lease that moves, or a second run beside it. The gauges are the detection
machinery's (``casewatch_detector_*{assistant, signal}``), so the quality-regression alert and
``casewatch detect`` cover case signals as they are.
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
from monitor.stats.detection_signals import Signal, case_signals
from monitor.storage import case_detection_queries as q
from monitor.storage.detector_saves import LiveCounts

JOB_NAME = "case_detection"


class _CaseVerdicts(StoreSource):
    """The case verdicts as the detectors' source."""

    queries: ClassVar[Queries] = q

    def read_new(self, limit: int) -> list[Observation]:
        return [
            Observation(o.id, o.assistant, o.judged_at, o.values if o.ok else {})
            for o in q.read_new(self._store, limit)
        ]

    def reference_counts(
        self, start: datetime, end: datetime, assistants: set[str] | None
    ) -> dict[str, dict[str, Counts]]:
        return {
            name: {s: Counts(c.cases, n) for s, n in c.severe.items()}
            for name, c in q.reference_counts(self._store, start, end, assistants).items()
        }

    def live_counts(
        self, since: datetime, recent_since: datetime
    ) -> dict[str, dict[str, LiveCounts]]:
        signals = [s.name for s in case_signals()]
        live = q.live_counts(self._store, since, recent_since)
        return {name: dict.fromkeys(signals, c) for name, c in live.items()}


class CaseDetectionJob(StoreSignalDetection):
    JOB_NAME = JOB_NAME
    WHAT = "case quality"
    SOURCE = _CaseVerdicts

    @staticmethod
    def signals() -> Sequence[Signal]:
        return case_signals()
