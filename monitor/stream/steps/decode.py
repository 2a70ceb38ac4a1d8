"""Decode + validate raw records; poison goes to the dead-letter queue with its reason.

A dead-lettered record is finished only once its dead letter is durable: the sink writes in
the background (a burst of poison is many records in flight together, not one broker round
trip each on the loop's thread), ``PendingDeadLetters`` keeps each delivery with its record,
and each ``poll`` marks done, without waiting, the records whose dead letter is acknowledged
and sends again those whose write failed; ``join`` waits once for the rest. A crash before
the acknowledgement re-reads the record instead of losing it. Past ``max_pending`` dead
letters (or 32 MB of their records) awaiting acknowledgement, and while the sink refuses
records, poison is rejected (backpressure, not data loss): the record is offered again later.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import structlog

from consumers.records import RawMessage
from monitor.errors import InvalidEvent
from monitor.runtime.clock import Clock, Deadline, SystemClock
from monitor.schema.turn import TurnEvent
from monitor.stream.steps.base import (
    MAX_PENDING_DEAD_LETTERS,
    DoneStep,
    Envelope,
    PendingDeadLetters,
    ProcessingStep,
)
from monitor.stream.steps.decisions import TurnDecisions

if TYPE_CHECKING:  # the protocol only: kafka-python need not be loaded
    from consumers.dlq import DeadLetterSink

log = structlog.get_logger(__name__)

DEFAULT_FLUSH_TIMEOUT_S = 10.0


class DecodeMetrics(Protocol):
    def record_dead_letter(self, reason: str) -> None: ...

    def record_dead_letter_held(self, why: str) -> None: ...


class DecodeStep:
    def __init__(
        self,
        next_step: ProcessingStep[TurnEvent],
        done: DoneStep,
        dlq: DeadLetterSink,
        metrics: DecodeMetrics,
        max_bytes: int,
        flush_timeout_s: float = DEFAULT_FLUSH_TIMEOUT_S,
        clock: Clock | None = None,
        *,
        decisions: TurnDecisions,
        max_pending: int = MAX_PENDING_DEAD_LETTERS,
    ) -> None:
        """``decisions``: the chain's (``turn_steps.turn_decisions``, one set per chain), which
        say how each topic's records are read (casewatch's own turn event, or a ``format:
        mapped`` topic's mapping); no default, so no decode step reads by decisions of its own."""
        if decisions.max_bytes != max_bytes:
            raise ValueError(f"max_bytes {max_bytes} is not the decisions' {decisions.max_bytes}")
        self._clock = clock or SystemClock()
        # The decisions' decoder, called here without a further frame per consumed record:
        # the one of every topic, or else the topic's, looked up as ``TurnDecisions.decoder``.
        self._only_decoder = decisions.only_decoder
        self._decoder = decisions.decoder
        self._max_bytes = max_bytes
        self._next = next_step
        self._done = done
        self._dlq = dlq
        self._metrics = metrics
        self._flush_timeout = flush_timeout_s
        self._pending = PendingDeadLetters(dlq, done, metrics.record_dead_letter_held, max_pending)

    def submit(self, message: Envelope[RawMessage]) -> None:
        try:
            decoder = self._only_decoder or self._decoder(message.tp.topic)
            turn = decoder(message.payload.value, self._max_bytes)
        except InvalidEvent as exc:
            self._dead_letter(message, exc)
            return
        # ``message.replace(turn)`` (a screening process's cheap look kept), without its call
        # per consumed record. The record's bytes ride along: until a step changes the turn,
        # decoding them again gives it, which the keeper of unsampled turns does off this thread.
        self._next.submit(
            Envelope(
                message.tp,
                message.offset,
                turn,
                message.reservation,
                message.look,
                message.payload.value,
            )
        )

    def _dead_letter(self, message: Envelope[RawMessage], exc: InvalidEvent) -> None:
        self._pending.send(message, exc, self._metrics.record_dead_letter)

    @property
    def dead_letters_pending(self) -> int:
        """Dead-lettered records whose dead letter is not acknowledged yet."""
        return len(self._pending)

    def poll(self) -> None:
        self._pending.settle()
        self._next.poll()

    def join(self, timeout: float | None = None) -> None:
        deadline = Deadline(timeout, self._clock)
        remaining = deadline.remaining()
        self._pending.flush(self._flush_timeout if remaining is None else remaining)
        self._next.join(deadline.remaining())

    def close(self) -> None:
        self._next.close()
