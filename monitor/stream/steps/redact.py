"""Redaction: personal data and secrets pseudonymized right after decode.

The step sits between decode and sampling, so with ``redaction.before_judging`` the sampling
rules, the identifier tripwire, the judges and the store only ever see placeholders
(``monitor.redaction``). With only ``redaction.stored_turns`` the raw turn is judged and
``RedactingWriter`` redacts what the ``turns`` table keeps (the step still enforces the bound,
so no turn reaches the store too large to redact).

A turn larger than ``redaction.max_chars`` (or one a detector fails on) is finished here,
counted in ``casewatch_turns_skipped_total`` under its own reason, and never passed on: a
turn that cannot be redacted is neither judged nor stored. Given a dead-letter sink (``casewatch
judge``: its rejects file), the step sends such a turn there with the reason instead, as the
decode step sends poison (``PendingDeadLetters``): without waiting on the loop's thread, done
once its dead letter is acknowledged (each ``poll`` checks, ``join`` waits once), sent again
when its write failed; while the sink refuses it, or past ``max_pending`` dead letters (or
32 MB of their records) awaiting acknowledgement, the turn is rejected (offered again later)
and counted in ``casewatch_dead_letters_held_total``.

``RedactingDeadLetterSink`` gives the dead-letter topic the same treatment (a poison record
must not leak what a valid one would not): value, key, header values and the failure detail
(pydantic's messages quote the input) are redacted as text; a value too large to redact is
withheld, its reason kept.

Counts per kind are added to ``casewatch_redactions_total`` once per ``poll``; values are
never logged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import structlog

from consumers.records import Delivery, RawMessage
from monitor.errors import InvalidEvent, MessageRejected
from monitor.redaction import Redactor, TooLargeToRedact
from monitor.runtime.clock import Clock, Deadline, SystemClock
from monitor.sampling.sampler import SampleDecision
from monitor.schema.turn import TurnEvent, Verdict
from monitor.stream.steps.base import (
    MAX_PENDING_DEAD_LETTERS,
    DoneStep,
    Envelope,
    PendingDeadLetters,
    ProcessingStep,
    SavedBatch,
    VerdictWriter,
    turn_record,
)
from monitor.stream.steps.decisions import TurnDecisions, Unredactable, redact_for_judging

if TYPE_CHECKING:  # the protocol only: kafka-python need not be loaded
    from consumers.dlq import DeadLetterSink

log = structlog.get_logger(__name__)

WITHHELD = "value withheld: too large to redact"
# How long a join without a timeout waits for the dead letters in flight.
DLQ_FLUSH_TIMEOUT_S = 10.0


class RedactionMetrics(Protocol):
    def record_redactions(self, counts: Mapping[str, int]) -> None: ...

    def record_dead_letter(self, reason: str) -> None: ...

    def record_dead_letter_held(self, why: str) -> None: ...

    def record_sampling(self, assistant: str, decision: SampleDecision, count: int = 1) -> None: ...


class _Tally:
    """Counts since the last flush: a Prometheus increment per value would be a per-turn cost."""

    def __init__(self, metrics: RedactionMetrics) -> None:
        self._metrics = metrics
        self.kinds: dict[str, int] = {}

    def add(self, counts: Mapping[str, int]) -> None:
        kinds = self.kinds
        for kind, n in counts.items():
            kinds[kind] = kinds.get(kind, 0) + n

    def flush(self) -> None:
        if self.kinds:
            kinds, self.kinds = self.kinds, {}
            self._metrics.record_redactions(kinds)


class RedactStep:
    def __init__(
        self,
        next_step: ProcessingStep[TurnEvent],
        done: DoneStep,
        decisions: TurnDecisions,
        metrics: RedactionMetrics,
        *,
        dlq: DeadLetterSink | None = None,
        max_pending: int = MAX_PENDING_DEAD_LETTERS,
        clock: Clock | None = None,
    ) -> None:
        """``decisions``: the chain's (its redactor, and whether the judges get the redacted
        turn: ``redaction.before_judging``), the ones screening decides by too. ``dlq``: where
        a turn that cannot be redacted goes (None: skipped, counted as not sampled)."""
        redaction = decisions.redaction
        if redaction is None:
            raise ValueError("a redact step needs decisions with a redactor")
        self._next = next_step
        self._done = done
        self._clock = clock or SystemClock()
        self._pending = (
            None
            if dlq is None
            else PendingDeadLetters(dlq, done, metrics.record_dead_letter_held, max_pending)
        )
        # What ``decisions.redact`` decides (``JudgingRedaction.redact``), called without its
        # two further frames per consumed turn.
        self._redactor = redaction.redactor
        self._forward_redacted = redaction.forward_redacted
        self._metrics = metrics
        self._tally = _Tally(metrics)
        # The redacted turn of a record the next step refused (and its counts): offered
        # again, not redone.
        self._held: tuple[Envelope[TurnEvent], Mapping[str, int]] | None = None

    def submit(self, message: Envelope[TurnEvent]) -> None:
        held = self._held
        if held is not None and held[0].offset == message.offset and held[0].tp == message.tp:
            self._next.submit(held[0])
            self._held = None
            self._tally.add(held[1])
            return
        outcome = redact_for_judging(
            self._redactor, message.payload, forward_redacted=self._forward_redacted
        )
        if isinstance(outcome, Unredactable):
            self._skip(message, outcome)
            return
        # A changed turn leaves its record's bytes behind (``replace``): they hold what was
        # redacted. An unchanged one keeps them, clean as the turn is.
        out = message if outcome.turn is message.payload else message.replace(outcome.turn)
        counts = outcome.counts
        try:
            self._next.submit(out)
        except MessageRejected:
            self._held = (out, counts)  # offered again, not redone
            raise
        self._held = None  # one held for a record that never came back is let go
        if counts:
            self._tally.add(counts)

    def _skip(self, message: Envelope[TurnEvent], outcome: Unredactable) -> None:
        if self._pending is not None:
            # The record's bytes are gone: the turn goes as re-serialized (the sink may
            # withhold a value too large to redact). Done once acknowledged; a refusing sink,
            # or too many dead letters in flight, rejects the record (offered again later).
            invalid = InvalidEvent(outcome.decision.reason, outcome.detail)
            record = message.replace(turn_record(message))
            self._pending.send(
                record, invalid, self._metrics.record_dead_letter, "turn", finishes=message
            )
            return
        log.warning(
            "turn not redacted; skipped, neither judged nor stored",
            reason=outcome.decision.reason,
            topic=message.tp.topic,
            partition=message.tp.partition,
            offset=message.offset,
            **outcome.why,
        )
        self._done.submit(message)
        self._metrics.record_sampling(message.payload.assistant.name, outcome.decision)

    @property
    def dead_letters_pending(self) -> int:
        """Turns sent to the dead-letter sink whose dead letter is not acknowledged yet."""
        return 0 if self._pending is None else len(self._pending)

    def poll(self) -> None:
        if self._pending is not None:
            self._pending.settle()
        self._tally.flush()
        self._next.poll()

    def join(self, timeout: float | None = None) -> None:
        self._tally.flush()
        deadline = Deadline(timeout, self._clock)
        if self._pending is not None:
            remaining = deadline.remaining()
            self._pending.flush(DLQ_FLUSH_TIMEOUT_S if remaining is None else remaining)
        self._next.join(deadline.remaining())

    def close(self) -> None:
        self._next.close()


class RedactingWriter:
    """The store's writer, redacting each turn first (``stored_turns`` without
    ``before_judging``: the judges saw the raw turn, the table keeps the redacted one)."""

    def __init__(
        self, writer: VerdictWriter, redactor: Redactor, metrics: RedactionMetrics
    ) -> None:
        self._writer = writer
        self._redactor = redactor
        self._metrics = metrics

    def save_batch(self, items: Sequence[tuple[TurnEvent, Verdict]]) -> SavedBatch:
        redacted = []
        counts: dict[str, int] = {}
        for turn, verdict in items:
            result = self._redactor.redact_turn(turn)  # within the bound: the step checked
            redacted.append((result.turn, verdict))
            for kind, n in result.counts.items():
                counts[kind] = counts.get(kind, 0) + n
        saved = self._writer.save_batch(redacted)
        if counts:
            self._metrics.record_redactions(counts)
        return saved


class RedactingDeadLetterSink:
    """A dead-letter sink that redacts what it forwards (``redaction.dead_letter``)."""

    def __init__(self, sink: DeadLetterSink, redactor: Redactor, metrics: RedactionMetrics) -> None:
        self._sink = sink
        self._redactor = redactor
        self._metrics = metrics

    def _text(self, data: bytes | None, counts: dict[str, int]) -> bytes | None:
        if data is None:
            return None
        # surrogateescape: bytes that are not UTF-8 go through unchanged, the rest is scanned
        text = data.decode("utf-8", errors="surrogateescape")
        out = self._redactor.redact_loose(text, counts)
        return out.encode("utf-8", errors="surrogateescape")

    def send(self, msg: RawMessage, reason: str, detail: str) -> Delivery:
        counts: dict[str, int] = {}
        try:
            value = self._text(msg.value, counts)
        except TooLargeToRedact:
            value, detail = b"", f"{WITHHELD}; {detail}"
        try:
            key = self._text(msg.key, counts)
            headers = tuple((name, self._text(v, counts) or b"") for name, v in msg.headers)
            detail = self._redactor.redact_loose(detail, counts)
        except TooLargeToRedact:
            key, headers, detail = None, (), WITHHELD
        delivery = self._sink.send(
            msg._replace(value=value, key=key, headers=headers), reason, detail
        )
        if counts:
            self._metrics.record_redactions(counts)
        return delivery

    def flush(self, timeout_s: float) -> None:
        self._sink.flush(timeout_s)

    def close(self) -> None:
        self._sink.close()
