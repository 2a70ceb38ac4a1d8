"""Persist verdicts in batches; a database outage is retried with backoff, never skipped.

Writes are idempotent on (event_id, judge config), so a batch retried after an error the
database did apply, or a turn replayed after a restart, is stored once (counted ``duplicate``).
While the database fails nothing is marked done: the buffer fills, ``submit`` rejects, the
judge step fills behind it and the daemon pauses its partitions. ``healthy`` turns False so
``/readyz`` reports the outage; the process keeps running and recovers on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import structlog

from monitor.clock import Backoff, Clock, Deadline
from monitor.errors import MessageRejected, StorageError
from monitor.models import TurnEvent, Verdict
from monitor.stream.steps.base import DoneStep, Envelope, JudgedTurn

log = structlog.get_logger(__name__)

DEFAULT_BATCH_SIZE = 64
_MIN_WAIT_S = 0.01  # join never spins, even with a zero backoff


class StoreMetrics(Protocol):
    def record_stored(self, inserted: int, duplicate: int) -> None: ...

    def record_storage_error(self) -> None: ...


class VerdictWriter(Protocol):
    def save_many(self, items: Sequence[tuple[TurnEvent, Verdict]]) -> int: ...


class StoreStep:
    def __init__(
        self,
        next_step: DoneStep,
        store: VerdictWriter,
        metrics: StoreMetrics,
        clock: Clock,
        batch_size: int = DEFAULT_BATCH_SIZE,
        backoff: Backoff | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self._next = next_step
        self._store = store
        self._metrics = metrics
        self._clock = clock
        self._batch_size = batch_size
        self._backoff = backoff or Backoff()
        self._buffer: list[Envelope[JudgedTurn]] = []
        self._failures = 0
        self._retry_at = 0.0
        self.last_error: str | None = None

    @property
    def healthy(self) -> bool:
        """False from a failed write until the next successful one."""
        return self._failures == 0

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def submit(self, message: Envelope[JudgedTurn]) -> None:
        if len(self._buffer) >= self._batch_size:
            self._flush()
            if len(self._buffer) >= self._batch_size:
                raise MessageRejected("verdict buffer full: the database is not keeping up")
        self._buffer.append(message)

    def _flush(self) -> bool:
        if not self._buffer:
            return True
        if self._failures and self._clock.monotonic() < self._retry_at:
            return False
        # Verdicts a judge thread stored already (write-through) are only counted here.
        items = [
            (m.payload.turn, m.payload.verdict) for m in self._buffer if m.payload.stored is None
        ]
        before = [m.payload.stored for m in self._buffer if m.payload.stored is not None]
        try:
            inserted = self._store.save_many(items) if items else 0
        except StorageError as exc:
            self._failures += 1
            delay = self._backoff.delay(self._failures)
            self._retry_at = self._clock.monotonic() + delay
            self.last_error = str(exc)
            self._metrics.record_storage_error()
            log.warning(
                "storing verdicts failed; retrying",
                error=str(exc),
                failures=self._failures,
                retry_in_s=round(delay, 2),
                held=len(self._buffer),
            )
            return False
        if self._failures:
            log.info("storage recovered", after_failures=self._failures)
        self._failures = 0
        self.last_error = None
        # save_many counts distinct new rows; a batch may repeat an event (duplicate publish).
        self._metrics.record_stored(inserted + sum(before), len(items) - inserted + before.count(0))
        for message in self._buffer:
            self._next.submit(message)
        self._buffer.clear()
        return True

    def poll(self) -> None:
        self._flush()
        self._next.poll()

    def join(self, timeout: float | None = None) -> None:
        deadline = Deadline(timeout, self._clock)
        while not self._flush():
            remaining = deadline.remaining()
            if remaining is not None and remaining <= 0:
                log.warning("drain timed out with verdicts unsaved", n=len(self._buffer))
                break
            wait = max(_MIN_WAIT_S, self._retry_at - self._clock.monotonic())
            self._clock.sleep(min(wait, remaining) if remaining is not None else wait)
        self._next.join(deadline.remaining())

    def close(self) -> None:
        self._next.close()
