"""The last step: marks offsets done and commits what became committable.

Commits are throttled to one per ``interval_s`` (on the injected clock) and forced on
``join``. The tracker decides what is committable: per partition, the offset below which every
message is finished, so an out-of-order judge completion never commits past unfinished work.
A refused commit is logged, counted and retried on the next interval; meanwhile at-least-once
delivery holds (a restart re-reads, the store deduplicates).

Shutdown: once ``stop_periodic()`` is called (the daemon does it on a stop request) only the
join commits, so a drain never waits on a periodic commit to an unreachable broker. The join's
commit gets the rest of the join's timeout, but at least ``final_commit_min_s``: committing what
the drain finished is its point. Its outcome is kept in ``final_error``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import structlog

from consumers.offsets import OffsetTracker
from consumers.records import TopicPartition
from monitor.errors import TransportError
from monitor.runtime.clock import Clock
from monitor.stream.steps.base import Envelope

log = structlog.get_logger(__name__)

FINAL_COMMIT_MIN_S = 5.0


class CommitMetrics(Protocol):
    def record_commit(self, topics: Iterable[str]) -> None: ...

    def record_commit_failure(self) -> None: ...


class Committer(Protocol):
    def commit(
        self, offsets: Mapping[TopicPartition, int], timeout_s: float | None = None
    ) -> None: ...


class CommitStep:
    def __init__(
        self,
        committer: Committer,
        tracker: OffsetTracker,
        metrics: CommitMetrics,
        clock: Clock,
        interval_s: float,
        final_commit_min_s: float = FINAL_COMMIT_MIN_S,
    ) -> None:
        self._committer = committer
        self._tracker = tracker
        self._metrics = metrics
        self._clock = clock
        self._interval = interval_s
        self._final_min = final_commit_min_s
        self._last: float | None = None
        self._periodic = True
        self.final_error: TransportError | None = None

    def submit(self, message: Envelope[Any]) -> None:
        self._tracker.done(message.tp, message.offset)

    def commit(self, timeout_s: float | None = None) -> bool:
        """Commit everything committable now; False if the broker refused (logged, retried)."""
        error = self._commit(timeout_s)
        if error is not None:
            log.warning("offset commit failed; will retry", error=str(error))
        return error is None

    def _commit(self, timeout_s: float | None) -> TransportError | None:
        self._last = self._clock.monotonic()
        offsets = self._tracker.committable()
        if not offsets:
            return None
        try:
            self._committer.commit(offsets, timeout_s=timeout_s)
        except TransportError as exc:
            self._metrics.record_commit_failure()
            return exc
        self._tracker.mark_committed(offsets)
        self._metrics.record_commit({tp.topic for tp in offsets})
        log.debug(
            "offsets committed", offsets={f"{t.topic}/{t.partition}": o for t, o in offsets.items()}
        )
        return None

    def stop_periodic(self) -> None:
        """Commit only on ``join`` from now on. A plain assignment: safe in a signal handler."""
        self._periodic = False

    def poll(self) -> None:
        if not self._periodic:
            return
        if self._last is None or self._clock.monotonic() - self._last >= self._interval:
            self.commit()

    def join(self, timeout: float | None = None) -> None:
        limit = None if timeout is None else max(timeout, self._final_min)
        self.final_error = self._commit(limit)
        if self.final_error is not None:
            log.error(
                "final offset commit failed; the uncommitted tail is re-read on restart",
                error=str(self.final_error),
            )

    def close(self) -> None:
        return None
