"""Small pieces shared by the step tests: a recording downstream step and envelopes."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, TypeVar

from consumers.dlq import DeadLetterSink
from consumers.records import Delivery, RawMessage, TopicPartition
from monitor.config.sampling import SamplingConfig
from monitor.errors import InvalidEvent, MessageRejected
from monitor.redaction.config import RedactionConfig
from monitor.sampling.budget import Reservation
from monitor.schema.turn import TurnEvent, Verdict
from monitor.stream.steps.base import Envelope
from monitor.stream.steps.decisions import Decoder, TurnDecisions, Unredactable
from monitor.stream.turn_steps import TurnStepsConfig, turn_decisions
from tests.fixtures.databases import make_verdict

T = TypeVar("T")

TP = TopicPartition("turns", 0)
# The topic whose dead-letter topic the ``gone_broker_sink`` fixture writes to.
OUTAGE_TOPIC = "outage.turns"


def env(
    payload: T,
    offset: int = 0,
    tp: TopicPartition = TP,
    reservation: Reservation | None = None,
) -> Envelope[T]:
    return Envelope(tp, offset, payload, reservation)


def raw(value: bytes | None, offset: int = 0, tp: TopicPartition = TP) -> RawMessage:
    return RawMessage(tp.topic, tp.partition, offset, value)


class Recorder:
    """A downstream step recording what it receives; ``capacity`` makes it reject when full."""

    def __init__(self, capacity: int | None = None) -> None:
        self.items: list[Envelope[Any]] = []
        self.capacity = capacity
        self.polls = 0
        self.joins: list[float | None] = []
        self.closed = False

    def submit(self, message: Envelope[Any]) -> None:
        if self.capacity is not None and len(self.items) >= self.capacity:
            raise MessageRejected("recorder full")
        self.items.append(message)

    def poll(self) -> None:
        self.polls += 1

    def join(self, timeout: float | None = None) -> None:
        self.joins.append(timeout)

    def close(self) -> None:
        self.closed = True

    @property
    def offsets(self) -> list[int]:
        return [m.offset for m in self.items]


class CountingSink:
    """A dead-letter sink (the real Kafka one in the integration tests), with the calls that can
    wait for the broker counted and each delivery kept: what a step asks of its sink, seen from
    outside."""

    def __init__(self, inner: DeadLetterSink) -> None:
        self.inner = inner
        self.flushes = 0
        self.deliveries: list[Delivery] = []

    def send(self, msg: RawMessage, reason: str, detail: str) -> Delivery:
        delivery = self.inner.send(msg, reason, detail)
        self.deliveries.append(delivery)
        return delivery

    def flush(self, timeout_s: float) -> None:
        self.flushes += 1
        self.inner.flush(timeout_s)

    def close(self) -> None:
        self.inner.close()


class GatedEvaluator:
    """Scores with a fixed verdict, but only once ``gate`` is open (to hold work in flight).

    Stands in for a judge whose timing the test must control; the judges themselves are
    tested against the real heuristic judge and the fake OpenAI server.
    """

    config_hash = "cfg-test"
    weight_profile = "default"

    def __init__(self, *, open_gate: bool = True, fail_for: frozenset[str] = frozenset()) -> None:
        self.gate = threading.Event()
        if open_gate:
            self.gate.set()
        self.fail_for = fail_for
        self.calls = 0
        self._lock = threading.Lock()

    def evaluate(self, turn: TurnEvent) -> Verdict:
        with self._lock:
            self.calls += 1
        self.gate.wait(timeout=30)
        if turn.event_id in self.fail_for:
            raise RuntimeError("evaluator bug")
        return make_verdict(turn, config_hash=self.config_hash)

    def close(self) -> None:
        self.gate.set()


class CostLog:
    """A ``monitor.sampling.budget.Budget`` admitting everything and recording each settlement."""

    def __init__(self) -> None:
        self.costs: list[float] = []
        self.calls: list[int] = []
        self.reserved: list[int] = []

    def reserve(self, requests: int) -> str | None:
        return None

    def settle(self, reserved: int, requests: int, usd: float) -> None:
        self.reserved.append(reserved)
        self.costs.append(usd)
        self.calls.append(requests)


def chain_decisions(
    sampling: SamplingConfig,
    redaction: RedactionConfig | None = None,
    *,
    max_bytes: int = 1 << 20,
    decoders: Mapping[str, Decoder] | None = None,
) -> TurnDecisions:
    """The decisions the daemon's chain would take with these sections (no redaction when
    ``redaction`` is None), built as the pipeline builds them."""
    config = TurnStepsConfig(
        concurrency=1,
        max_in_flight=1,
        max_bytes=max_bytes,
        flush_timeout_s=1.0,
        redaction=redaction or RedactionConfig(enabled=False),
        identifier_tripwire=sampling.identifier_tripwire,
    )
    return turn_decisions(config, decoders=decoders, sampling=sampling)


def part_by_part(decisions: TurnDecisions, topic: str, value: bytes | None) -> TurnEvent | None:
    """The turn the steps would finish unjudged, through the decisions' parts one by one in
    the steps' order (decode, redact, tripwire, the sampling reason), else None."""
    try:
        turn = decisions.decode(topic, value)
    except InvalidEvent:
        return None
    redacted = decisions.redact(turn)
    if isinstance(redacted, Unredactable):
        return None
    turn = redacted.turn
    if decisions.tripwire is not None:
        hit = decisions.tripwire(turn)
        if hit.kinds or hit.truncated:
            return None
    if decisions.sampling is None or decisions.reason_for(turn) is not None:
        return None
    return turn
