"""The last step: marks offsets done and commits what became committable.

Commits are throttled to one per ``interval_s`` (on the injected clock) and forced on
``join``. The tracker decides what is committable: per partition, the offset below which every
message is finished, so an out-of-order judge completion never commits past unfinished work.
A refused commit is logged, counted and retried on the next interval; meanwhile at-least-once
delivery holds (a restart re-reads, the store deduplicates).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import structlog

from consumers.offsets import OffsetTracker
from consumers.records import TopicPartition
from monitor.clock import Clock
from monitor.errors import BrokerError
from monitor.exporter import Metrics
from monitor.pipeline.base import Envelope

log = structlog.get_logger(__name__)


class Committer(Protocol):
    def commit(self, offsets: Mapping[TopicPartition, int]) -> None: ...


class CommitStep:
    def __init__(
        self,
        committer: Committer,
        tracker: OffsetTracker,
        metrics: Metrics,
        clock: Clock,
        interval_s: float,
    ) -> None:
        self._committer = committer
        self._tracker = tracker
        self._metrics = metrics
        self._clock = clock
        self._interval = interval_s
        self._last: float | None = None

    def submit(self, message: Envelope[Any]) -> None:
        self._tracker.done(message.tp, message.offset)

    def commit(self) -> bool:
        """Commit everything committable now; False if the broker refused."""
        self._last = self._clock.monotonic()
        offsets = self._tracker.committable()
        if not offsets:
            return True
        try:
            self._committer.commit(offsets)
        except BrokerError as exc:
            self._metrics.commit_failures.inc()
            log.warning("offset commit failed; will retry", error=str(exc))
            return False
        self._tracker.mark_committed(offsets)
        self._metrics.record_commit({tp.topic for tp in offsets})
        log.debug(
            "offsets committed", offsets={f"{t.topic}/{t.partition}": o for t, o in offsets.items()}
        )
        return True

    def poll(self) -> None:
        if self._last is None or self._clock.monotonic() - self._last >= self._interval:
            self.commit()

    def join(self, timeout: float | None = None) -> None:
        self.commit()

    def close(self) -> None:
        return None
