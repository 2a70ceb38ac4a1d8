"""Decode + validate raw records; poison goes to the dead-letter queue with its reason.

A dead-lettered record is finished only once the DLQ write is durable: its offset is marked
done after ``flush`` succeeds (batched once per ``poll``), so a crash between the send and the
flush re-reads the record instead of losing it. A DLQ that refuses writes is backpressure, not
data loss: the record is rejected and offered again later.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import structlog

from consumers.records import RawMessage
from monitor.clock import Clock, Deadline, SystemClock
from monitor.errors import InvalidEvent, TransportError
from monitor.models import TurnEvent
from monitor.stream.steps.base import DoneStep, Envelope, ProcessingStep, dead_letter
from monitor.stream.steps.decisions import TurnDecisions

if TYPE_CHECKING:  # the protocol only: kafka-python need not be loaded
    from consumers.dlq import DeadLetterSink

log = structlog.get_logger(__name__)

DEFAULT_FLUSH_TIMEOUT_S = 10.0


class DecodeMetrics(Protocol):
    def record_dead_letter(self, reason: str) -> None: ...


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
        decisions: TurnDecisions | None = None,
    ) -> None:
        """``decisions``: the chain's, which say how each topic's records are read (a
        ``format: mapped`` topic's mapping; None: every topic is casewatch's own turn event)."""
        if decisions is None:
            decisions = TurnDecisions(max_bytes)
        elif decisions.max_bytes != max_bytes:
            raise ValueError(f"max_bytes {max_bytes} is not the decisions' {decisions.max_bytes}")
        self._clock = clock or SystemClock()
        self._decode = decisions.decode
        self._next = next_step
        self._done = done
        self._dlq = dlq
        self._metrics = metrics
        self._flush_timeout = flush_timeout_s
        self._unflushed: list[Envelope[RawMessage]] = []

    def submit(self, message: Envelope[RawMessage]) -> None:
        try:
            turn = self._decode(message.tp.topic, message.payload.value)
        except InvalidEvent as exc:
            self._dead_letter(message, exc)
            return
        self._next.submit(message.replace(turn))

    def _dead_letter(self, message: Envelope[RawMessage], exc: InvalidEvent) -> None:
        dead_letter(self._dlq, self._metrics.record_dead_letter, message, exc)
        self._unflushed.append(message)

    def _flush(self, timeout: float) -> bool:
        if not self._unflushed:
            return True
        try:
            self._dlq.flush(timeout)
        except TransportError as err:
            log.warning("dead-letter flush failed; will retry", error=str(err))
            return False
        for message in self._unflushed:
            self._done.submit(message)
        self._unflushed.clear()
        return True

    def poll(self) -> None:
        self._flush(self._flush_timeout)
        self._next.poll()

    def join(self, timeout: float | None = None) -> None:
        deadline = Deadline(timeout, self._clock)
        remaining = deadline.remaining()
        self._flush(self._flush_timeout if remaining is None else remaining)
        self._next.join(deadline.remaining())

    def close(self) -> None:
        self._next.close()
