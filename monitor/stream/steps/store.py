"""Persist verdicts in batches; a database outage is retried with backoff, never skipped.

Writes are idempotent on (event_id, judge config), so a batch retried after an error the
database did apply, or a turn replayed after a restart, is stored once (counted ``duplicate``).
While the database fails nothing is marked done: the buffer fills, ``submit`` rejects, the
judge step fills behind it and the daemon pauses its partitions. ``healthy`` turns False so
``/readyz`` reports the outage; the process keeps running and recovers on its own.

A turn the database refuses (its data, e.g. a NUL character PostgreSQL cannot hold: see
``monitor.storage.refusals``) is not an outage: the store isolates it, stores the rest of the
batch, and this step sends it to the dead-letter topic with reason ``unstorable`` and the
database's message, as the decode step sends poison (``PendingDeadLetters``): without waiting
on the loop's thread, marked done once its dead letter is acknowledged (each ``poll`` checks,
``join`` waits once), sent again when its write failed. Its judge call is never made again.
While the dead-letter queue refuses it, or past ``max_pending`` dead letters (or 32 MB of
their records) awaiting acknowledgement, it is held uncommitted and counted
(``casewatch_dead_letters_held_total``), no further batch is written, and once the buffer
is full ``submit`` rejects (backpressure).

Write-through (``write_now``, the judge step's ``on_judged`` when the chain is built with
``TurnStepsConfig.write_through``, as in the daemon) stores each verdict from the judge thread
that made it, before that thread takes the next turn: a paid verdict never waits in memory for
the loop, so a SIGKILL costs at most the calls in flight. Those verdicts still reach this step
on the loop's thread, in order with the rest; only the ones whose write-through failed are
written here. Every verdict is counted once, here, whichever write stored it.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, NamedTuple, Protocol

import structlog

from monitor.errors import InvalidEvent, MessageRejected, StorageError
from monitor.runtime.clock import Backoff, Clock, Deadline, RetryState
from monitor.schema.turn import TurnEvent, Verdict
from monitor.stream.steps.base import (
    MAX_PENDING_DEAD_LETTERS,
    DoneStep,
    Envelope,
    JudgedTurn,
    PendingDeadLetters,
    VerdictWriter,
    turn_record,
)

if TYPE_CHECKING:  # the protocol only: kafka-python need not be loaded
    from consumers.dlq import DeadLetterSink

log = structlog.get_logger(__name__)

DEFAULT_BATCH_SIZE = 64
_MIN_WAIT_S = 0.01  # join never spins, even with a zero backoff
# How long a join without a timeout waits for the dead letters in flight.
DLQ_FLUSH_TIMEOUT_S = 10.0
UNSTORABLE = "unstorable"  # the dead-letter reason of a turn the database refuses


class StoreMetrics(Protocol):
    def record_stored(self, inserted: int, duplicate: int) -> None: ...

    def record_storage_error(self) -> None: ...

    def record_dead_letter(self, reason: str) -> None: ...

    def record_dead_letter_held(self, why: str) -> None: ...


class _Written(NamedTuple):
    """What a write-through of one verdict did."""

    verdict: Verdict  # held, so its id() is not reused while the entry lives
    inserted: int  # 1 new, 0 already stored
    refused: str | None  # the database's reason when it refused the row


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
        max_pending: int = MAX_PENDING_DEAD_LETTERS,
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
        # Refused by the database, waiting for the dead-letter queue to take them; then
        # dead letters in flight, each finishing its turn once acknowledged.
        self._unstorable: list[tuple[Envelope[JudgedTurn], str]] = []
        self._pending = PendingDeadLetters(
            dlq, next_step, metrics.record_dead_letter_held, max_pending
        )
        self.last_error: str | None = None
        # Verdicts a judge thread stored (``write_now``), by id(verdict): set there before the
        # verdict's future completes, read here once the loop hands its turn on.
        self._written: dict[int, _Written] = {}
        self._written_lock = threading.Lock()

    @property
    def healthy(self) -> bool:
        """False from a failed write until the next successful one."""
        return self._retry.healthy

    @property
    def buffered(self) -> int:
        """Turns not stored yet, and refused turns the dead-letter queue has not taken."""
        return len(self._buffer) + len(self._unstorable)

    @property
    def dead_letters_pending(self) -> int:
        """Refused turns sent to the dead-letter queue, not acknowledged yet."""
        return len(self._pending)

    def write_now(self, turn: TurnEvent, verdict: Verdict) -> None:
        """On a judge thread (write-through): store one judged turn now. A write that fails
        is left to the loop's batch write, with its retries and backoff."""
        try:
            saved = self._store.save_batch([(turn, verdict)])
        except StorageError as exc:  # the database is down: the batch write retries
            log.debug("storing a verdict from the judge thread failed", error=str(exc))
            return
        refused = saved.refused[0].message if saved.refused else None
        with self._written_lock:
            self._written[id(verdict)] = _Written(verdict, saved.inserted, refused)

    def _written_of(self, verdict: Verdict) -> _Written | None:
        with self._written_lock:
            written = self._written.get(id(verdict))
        return written if written is not None and written.verdict is verdict else None

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
        buffer = self._buffer
        written = [self._written_of(m.payload.verdict) for m in buffer]
        items = [
            (m.payload.turn, m.payload.verdict)
            for m, w in zip(buffer, written, strict=True)
            if w is None
        ]
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
                held=len(buffer),
            )
            return False
        failures = self._retry.succeeded()
        if failures:
            log.info("storage recovered", after_failures=failures)
        self.last_error = None
        inserted = result.inserted if result is not None else 0
        refused_here = {
            (r.item[0].event_id, r.item[1].judge_config_hash): r.message
            for r in (result.refused if result is not None else ())
        }
        with self._written_lock:
            for w in written:
                if w is not None:
                    del self._written[id(w.verdict)]
        refused = 0
        for message, w in zip(buffer, written, strict=True):
            turn, verdict = message.payload.turn, message.payload.verdict
            if w is not None:
                inserted += w.inserted
                why = w.refused
            else:
                why = refused_here.get((turn.event_id, verdict.judge_config_hash))
            if why is None:
                self._next.submit(message)
            else:
                refused += 1
                self._unstorable.append((message, why))
        # One count for every verdict, however it was written; save_batch counts distinct new
        # rows, and a batch may repeat an event (a duplicate publish).
        self._metrics.record_stored(inserted, len(buffer) - inserted - refused)
        buffer.clear()
        return self._dead_letter()

    def _dead_letter(self) -> bool:
        """Send the refused turns to the dead-letter queue without waiting; each is done once
        its dead letter is acknowledged. False while one is held: the queue refuses it, or too
        many dead letters await acknowledgement."""
        while self._unstorable:
            message, why = self._unstorable[0]
            turn = message.payload.turn
            detail = f"the database refused turn {turn.event_id!r}: {why}"
            record = message.replace(turn_record(message))
            try:
                self._pending.send(
                    record,
                    InvalidEvent(UNSTORABLE, detail),
                    self._metrics.record_dead_letter,
                    "unstorable turn",
                    finishes=message,
                )
            except MessageRejected:  # counted and logged there; sent on a later poll
                return False
            self._unstorable.pop(0)
            log.error(
                "turn dead-lettered: the database refuses it",
                event_id=turn.event_id,
                topic=message.tp.topic,
                partition=message.tp.partition,
                offset=message.offset,
                error=why,
            )
        return True

    def poll(self) -> None:
        self._pending.settle()
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
            self._pending.settle()
        remaining = deadline.remaining()
        # As the decode step: one wait for the dead letters in flight; what is not acknowledged
        # by then stays uncommitted (re-read, and dead-lettered again, after a restart).
        self._pending.flush(DLQ_FLUSH_TIMEOUT_S if remaining is None else remaining)
        self._next.join(deadline.remaining())

    def close(self) -> None:
        self._next.close()
