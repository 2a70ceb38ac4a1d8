"""Outcome events off the turn chain: records of an outcomes topic are decoded, their comment
redacted, stored once per outcome id and counted; every other record goes on unchanged.

First in the daemon's chain (``docs/outcomes.md``), so the turn steps never see an outcome.
Records are held in a bounded buffer and written in one transaction per batch
(``OutcomeRecords.save``) on a writer thread of the step's own, so the consumer thread never
waits for the database (a write on it took a tenth of intake's time in ``bench/ingest.py
--outcomes``): a poll hands the buffer to the writer when no write is under way and either
``WRITE_BATCH`` events wait, the poll brought none since the last, or the oldest has waited
``MAX_HOLD_S`` (a write costs its
transaction whatever it holds, and at a poll's few dozen events that was most of an event's
cost), and a later poll collects the result. Outcomes new to the store are counted once a
batch (``record_outcomes``), not once an event. A record is finished (handed to the commit
step, on the consumer thread) only once its outcome is stored, found stored before (a
duplicate: counted, nothing else), or dead-lettered:
a malformed event or a rating off its scale with its reason (``OUTCOME_DLQ_REASONS``), a row the
database refuses as ``unstorable``. A database outage keeps the buffer and retries it with
backoff; a full buffer rejects (intake waits). A stop with a write under way (``join`` timed
out, or a crash) leaves its records uncommitted: read again, they are stored once all the
same. A comment is redacted as turns are
(``Redactor.redact_loose``); one too large to redact is stored without it
(``comment_dropped``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from typing import TYPE_CHECKING, Protocol

import structlog

from consumers.records import RawMessage
from monitor.errors import InvalidEvent, MessageRejected, StorageError
from monitor.redaction import Redactor
from monitor.runtime.clock import Backoff, Clock, Deadline, RetryState, SystemClock
from monitor.runtime.workers import DaemonThreadPool
from monitor.schema.outcome import OutcomeEvent
from monitor.stream.steps.base import (
    HELD_UNAVAILABLE,
    MAX_PENDING_DEAD_LETTERS,
    DoneStep,
    Envelope,
    PendingDeadLetters,
    ProcessingStep,
    dead_letter,
)

if TYPE_CHECKING:
    from consumers.dlq import DeadLetterSink
    from monitor.storage.outcomes import SaveOutcomes

log = structlog.get_logger(__name__)

WRITE_BATCH = 500  # outcome events a write waits for while intake brings more
# ...but no longer than this from the oldest event buffered: a feed bringing a few events at
# every poll is written all the same, and its offsets committed.
MAX_HOLD_S = 1.0
UNSTORABLE = "unstorable"  # the dead-letter reason of an outcome the database refuses
# One raw record value (and the size bound) -> its outcome, or ``InvalidEvent`` with the reason.
OutcomeDecoder = Callable[[bytes | None, int], OutcomeEvent]
OutcomeItem = tuple[OutcomeEvent, str | None]


class OutcomeWriter(Protocol):
    def save(self, items: Sequence[OutcomeItem]) -> SaveOutcomes: ...


class OutcomeMetrics(Protocol):
    def record_outcomes(self, counts: Mapping[tuple[str, str], int], *, joined: int) -> None:
        """Outcome events new to the store: how many per (assistant, kind), ``joined`` of
        them to a turn on arrival."""
        ...

    def record_duplicates(self, count: int) -> None: ...

    def record_comment_dropped(self) -> None: ...


class IntakeMetrics(Protocol):
    def record_dead_letter(self, reason: str) -> None: ...

    def record_dead_letter_held(self, why: str) -> None: ...

    def record_storage_error(self) -> None: ...


class OutcomeStep:
    def __init__(
        self,
        next_step: ProcessingStep[RawMessage],
        done: DoneStep,
        dlq: DeadLetterSink,
        writer: OutcomeWriter,
        metrics: IntakeMetrics,
        outcomes: OutcomeMetrics,
        decoders: Mapping[str, OutcomeDecoder],
        *,
        max_bytes: int,
        max_buffered: int,
        redactor: Redactor | None = None,
        clock: Clock | None = None,
        max_pending: int = MAX_PENDING_DEAD_LETTERS,
    ) -> None:
        """``decoders``: per outcomes topic, how its records are read; records of any other
        topic go to ``next_step``."""
        if max_buffered < 1:
            raise ValueError(f"max_buffered must be >= 1, got {max_buffered}")
        self._next = next_step
        self._done = done
        self._writer = writer
        self._metrics = metrics
        self._outcomes = outcomes
        self._decoders = dict(decoders)
        self._max_bytes = max_bytes
        self._max_buffered = max_buffered
        self._redactor = redactor
        self._clock = clock or SystemClock()
        self._retry = RetryState(Backoff(initial_s=0.5, max_s=30.0), self._clock)
        self._pending = PendingDeadLetters(dlq, done, metrics.record_dead_letter_held, max_pending)
        self._buffer: list[tuple[Envelope[RawMessage], OutcomeItem]] = []
        # The batch the writer thread is storing, and its result to come.
        self._writing: list[tuple[Envelope[RawMessage], OutcomeItem]] = []
        self._write: Future[SaveOutcomes] | None = None
        self._pool = DaemonThreadPool(1, "outcome-writer")
        self._refused: list[tuple[Envelope[RawMessage], InvalidEvent]] = []
        self._dlq = dlq
        # A write waits for this many events while polls still bring more: each write costs
        # a transaction and its statements whatever it holds (~1-2 ms on SQLite), which at a
        # poll's few dozen events was most of what an event cost (``bench/ingest.py
        # --outcomes``). A poll that brought none writes what there is.
        self._write_batch = max(1, min(WRITE_BATCH, max_buffered // 2))
        self._fresh = False  # an event was buffered since the last poll
        self._buffered_since = 0.0  # when the oldest event waiting in the buffer came

    @property
    def buffered(self) -> int:
        """Outcome records decoded and not stored yet (a write under way included)."""
        return len(self._buffer) + len(self._writing)

    @property
    def writing(self) -> bool:
        """A batch is with the writer thread, its result not collected yet."""
        return self._write is not None

    def submit(self, message: Envelope[RawMessage]) -> None:
        decode = self._decoders.get(message.tp.topic)
        if decode is None:
            self._next.submit(message)
            return
        if self.buffered + len(self._refused) >= self._max_buffered:
            raise MessageRejected("outcome events await their database write")
        try:
            event = decode(message.payload.value, self._max_bytes)
        except InvalidEvent as exc:
            self._pending.send(message, exc, self._metrics.record_dead_letter, "outcome event")
            return
        if not self._buffer:
            self._buffered_since = self._clock.monotonic()
        self._buffer.append((message, (event, self._comment(event))))
        self._fresh = True

    def _comment(self, event: OutcomeEvent) -> str | None:
        if event.comment is None or self._redactor is None:
            return event.comment
        try:
            return self._redactor.redact_loose(event.comment)
        except Exception as exc:  # too large, or a detector failed: never stored unredacted
            self._outcomes.record_comment_dropped()
            log.warning(
                "outcome comment not redactable; stored without it",
                outcome_id=event.outcome_id,
                error=type(exc).__name__,
            )
            return None

    def _start_write(self, *, hold: bool = False) -> None:
        """Hand the buffer to the writer thread, unless a write is under way or the retry of a
        failed one is not due (``hold``: or the buffer is short of a batch)."""
        if self._write is not None or not self._buffer or not self._retry.due():
            return
        if (
            hold
            and len(self._buffer) < self._write_batch
            and self._clock.monotonic() - self._buffered_since < MAX_HOLD_S
        ):
            return
        self._writing, self._buffer = self._buffer, []
        self._write = self._pool.submit(self._writer.save, [item for _, item in self._writing])

    def _collect(self) -> None:
        """Finish the records of a write that ended: stored ones to the commit step, refused
        ones to be dead-lettered; a failed write's records go back to the buffer's front."""
        write = self._write
        if write is None or not write.done():
            return
        self._write = None
        batch, self._writing = self._writing, []
        try:
            result = write.result()
        except StorageError as exc:
            self._buffer[:0] = batch
            delay = self._retry.failed()
            self._metrics.record_storage_error()
            if self._retry.failures == 1:
                log.warning("outcome events not stored; retrying", error=str(exc), retry_s=delay)
            return
        if self._retry.succeeded():
            log.info("outcome events stored again")
        # Counted once a batch, not once an event: a label look-up per series, not per event.
        counts: dict[tuple[str, str], int] = {}
        joined = 0
        for saved in result.inserted:
            event = saved.event
            key = (event.assistant, event.signal_kind)
            counts[key] = counts.get(key, 0) + 1
            joined += saved.joined
        if counts:
            self._outcomes.record_outcomes(counts, joined=joined)
        self._outcomes.record_duplicates(result.duplicates)
        refused = {r.item[0].outcome_id: r.message for r in result.refused}
        for message, (event, _) in batch:
            why = refused.get(event.outcome_id)
            if why is None:
                self._done.submit(message)
                continue
            self._refused.append((message, InvalidEvent(UNSTORABLE, why)))
        self._dead_letter_refused()

    def _dead_letter_refused(self) -> None:
        """Dead-letter the outcomes the database refused; one the sink does not take now stays
        to be sent on the next poll."""
        while self._refused:
            message, exc = self._refused[0]
            try:
                delivery = dead_letter(
                    self._dlq,
                    self._metrics.record_dead_letter,
                    message,
                    exc,
                    "outcome event",
                    wait_s=None,
                )
            except MessageRejected:
                self._metrics.record_dead_letter_held(HELD_UNAVAILABLE)
                return
            self._pending.add(message, exc, delivery)
            self._refused.pop(0)

    def poll(self) -> None:
        self._pending.settle()
        self._dead_letter_refused()
        self._collect()
        hold, self._fresh = self._fresh, False
        self._start_write(hold=hold)
        self._next.poll()

    def join(self, timeout: float | None = None) -> None:
        deadline = Deadline(timeout, self._clock)
        while True:
            self._collect()
            if self._write is None and not self._buffer:
                break
            remaining = deadline.remaining()
            if self._write is not None:
                if remaining is not None and remaining <= 0:
                    break  # left uncommitted: read again after a restart (stored once all the same)
                wait_futures([self._write], timeout=remaining)
                continue
            if not self._retry.due():
                if remaining is not None and remaining <= self._retry.remaining():
                    break  # likewise
                self._retry.wait()
            self._start_write()
        remaining = deadline.remaining()
        self._pending.flush(10.0 if remaining is None else remaining)
        self._next.join(deadline.remaining())

    def close(self) -> None:
        """Drop what is not stored (uncommitted: read again after a restart) without waiting
        for a write under way, whose result nobody collects."""
        self._buffer = []
        self._writing = []
        self._write = None
        self._pool.shutdown()
        self._next.close()


__all__ = ["UNSTORABLE", "OutcomeDecoder", "OutcomeStep", "OutcomeWriter"]
