"""Persist verdicts in batches; a database outage is retried with backoff, never skipped.

Writes are idempotent on (event_id, judge config), so a batch retried after an error the
database did apply, or a turn replayed after a restart, is stored once (counted ``duplicate``).
While the database fails nothing is marked done: the buffer fills, ``submit`` rejects, the
judge step fills behind it and the daemon pauses its partitions. ``healthy`` turns False so
``/readyz`` reports the outage; the process keeps running and recovers on its own.

A turn the database refuses (its data, e.g. a NUL character PostgreSQL cannot hold: see
``monitor.storage.refusals``) is not an outage: the store isolates it, stores the rest of the
batch, and this step sends it to the dead-letter topic with reason ``unstorable`` and the
database's message, then marks it done. Its judge call is never made again. A dead-letter
queue that refuses writes holds it (backpressure), as in the decode step.
"""

from __future__ import annotations

from typing import Protocol

import structlog

from consumers.dlq import DeadLetterSink
from consumers.records import RawMessage
from monitor.clock import Backoff, Clock, Deadline, RetryState
from monitor.errors import MessageRejected, StorageError, TransportError
from monitor.stream.steps.base import DoneStep, Envelope, JudgedTurn, VerdictWriter

log = structlog.get_logger(__name__)

DEFAULT_BATCH_SIZE = 64
_MIN_WAIT_S = 0.01  # join never spins, even with a zero backoff
DLQ_FLUSH_TIMEOUT_S = 10.0
UNSTORABLE = "unstorable"  # the dead-letter reason of a turn the database refuses


class StoreMetrics(Protocol):
    def record_stored(self, inserted: int, duplicate: int) -> None: ...

    def record_storage_error(self) -> None: ...

    def record_dead_letter(self, reason: str) -> None: ...


class StoreStep:
    def __init__(
        self,
        next_step: DoneStep,
        store: VerdictWriter,
        metrics: StoreMetrics,
        clock: Clock,
        batch_size: int = DEFAULT_BATCH_SIZE,
        backoff: Backoff | None = None,
        *,
        dlq: DeadLetterSink,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self._next = next_step
        self._store = store
        self._metrics = metrics
        self._clock = clock
        self._batch_size = batch_size
        self._retry = RetryState(backoff or Backoff(), clock)
        self._buffer: list[Envelope[JudgedTurn]] = []
        self._dlq = dlq
        # Refused by the database, waiting for the dead-letter queue to take them.
        self._unstorable: list[tuple[Envelope[JudgedTurn], str]] = []
        self.last_error: str | None = None

    @property
    def healthy(self) -> bool:
        """False from a failed write until the next successful one."""
        return self._retry.healthy

    @property
    def buffered(self) -> int:
        return len(self._buffer) + len(self._unstorable)

    def submit(self, message: Envelope[JudgedTurn]) -> None:
        if self.buffered >= self._batch_size:
            self._flush()
            if self.buffered >= self._batch_size:
                raise MessageRejected("verdict buffer full: the database is not keeping up")
        self._buffer.append(message)

    def _flush(self) -> bool:
        if not self._dead_letter():
            return False
        if not self._buffer:
            return True
        if not self._retry.due():
            return False
        # Verdicts a judge thread stored already (write-through) are only counted here.
        items = [
            (m.payload.turn, m.payload.verdict) for m in self._buffer if m.payload.stored is None
        ]
        before = [m.payload.stored for m in self._buffer if m.payload.stored is not None]
        try:
            result = self._store.save_batch(items) if items else None
        except StorageError as exc:
            delay = self._retry.failed()
            self.last_error = str(exc)
            self._metrics.record_storage_error()
            log.warning(
                "storing verdicts failed; retrying",
                error=str(exc),
                failures=self._retry.failures,
                retry_in_s=round(delay, 2),
                held=len(self._buffer),
            )
            return False
        failures = self._retry.succeeded()
        if failures:
            log.info("storage recovered", after_failures=failures)
        self.last_error = None
        inserted = result.inserted if result is not None else 0
        refused_rows = list(result.refused) if result is not None else []
        refused = {
            (r.item[0].event_id, r.item[1].judge_config_hash): r.message for r in refused_rows
        }
        # save_batch counts distinct new rows; a batch may repeat an event (duplicate publish).
        self._metrics.record_stored(
            inserted + sum(before), len(items) - inserted - len(refused_rows) + before.count(0)
        )
        for message in self._buffer:
            why = refused.get(
                (message.payload.turn.event_id, message.payload.verdict.judge_config_hash)
            )
            if why is None:
                self._next.submit(message)
            else:
                self._unstorable.append((message, why))
        self._buffer.clear()
        return self._dead_letter()

    def _dead_letter(self) -> bool:
        """Send the refused turns to the dead-letter queue; each is done once it is there."""
        while self._unstorable:
            message, why = self._unstorable[0]
            turn = message.payload.turn
            detail = f"the database refused turn {turn.event_id!r}: {why}"
            try:
                self._dlq.send(_as_record(message), UNSTORABLE, detail)
                self._dlq.flush(DLQ_FLUSH_TIMEOUT_S)
            except TransportError as err:
                log.warning(
                    "dead-letter queue refused an unstorable turn; will retry", error=str(err)
                )
                return False
            self._unstorable.pop(0)
            self._metrics.record_dead_letter(UNSTORABLE)
            log.error(
                "turn dead-lettered: the database refuses it",
                event_id=turn.event_id,
                topic=message.tp.topic,
                partition=message.tp.partition,
                offset=message.offset,
                error=why,
            )
            self._next.submit(message)
        return True

    def poll(self) -> None:
        self._flush()
        self._next.poll()

    def join(self, timeout: float | None = None) -> None:
        deadline = Deadline(timeout, self._clock)
        while not self._flush():
            remaining = deadline.remaining()
            if remaining is not None and remaining <= 0:
                log.warning("drain timed out with verdicts unsaved", n=self.buffered)
                break
            wait = max(_MIN_WAIT_S, self._retry.remaining())
            self._clock.sleep(min(wait, remaining) if remaining is not None else wait)
        self._next.join(deadline.remaining())

    def close(self) -> None:
        self._next.close()


def _as_record(message: Envelope[JudgedTurn]) -> RawMessage:
    """The turn as a record for the dead-letter queue. The original bytes are gone by now, so
    the value is the decoded turn re-serialized (unknown producer fields included), which
    ``casewatch replay`` can publish again once the data is fixed."""
    value = message.payload.turn.model_dump_json().encode()
    return RawMessage(message.tp.topic, message.tp.partition, message.offset, value)
