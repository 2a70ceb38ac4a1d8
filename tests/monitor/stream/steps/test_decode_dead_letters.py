"""The decode step with the Kafka dead-letter queue on a real broker: a burst of poison goes
out together (no broker round trip per record on the loop's thread), a dead-lettered offset
is done only once its dead letter is acknowledged, a dead letter that is not written holds its
record and is counted, and past the bound of dead letters in flight poison is rejected."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from consumers.dlq import KafkaDeadLetterQueue
from consumers.records import RawMessage, TopicPartition
from monitor.errors import InvalidEvent, MessageRejected
from monitor.metrics.exporter import Metrics
from monitor.stream.recorder import StreamRecorder
from monitor.stream.steps.base import PendingDeadLetters
from monitor.stream.steps.decisions import TurnDecisions
from monitor.stream.steps.decode import DecodeStep
from tests.fixtures.broker import DLQ_SUFFIX, ContractBroker
from tests.monitor.stream.steps.helpers import OUTAGE_TOPIC, CountingSink, Recorder, env, raw
from tests.support.kafka import read_topic, source_config
from tests.support.waiting import DEADLINE_S, wait_for

pytestmark = pytest.mark.integration

BURST = 50


def _step(sink: CountingSink, registry: CollectorRegistry, done: Recorder, **kw: int) -> DecodeStep:
    metrics = StreamRecorder(Metrics(registry))
    decisions = TurnDecisions(100_000)
    return DecodeStep(Recorder(), done, sink, metrics, 100_000, decisions=decisions, **kw)


def _held(registry: CollectorRegistry, why: str) -> float:
    return registry.get_sample_value("casewatch_dead_letters_held_total", {"why": why}) or 0.0


def _poison(topic: str, offset: int) -> RawMessage:
    return raw(b"{not json", offset=offset, tp=TopicPartition(topic, 0))


def test_a_burst_of_poison_is_in_flight_together_and_done_once_acknowledged(
    kafka_broker: ContractBroker, contract_topic: str
) -> None:
    sink = CountingSink(KafkaDeadLetterQueue(source_config(kafka_broker, contract_topic)))
    registry, done = CollectorRegistry(), Recorder()
    step = _step(sink, registry, done)
    tp = TopicPartition(contract_topic, 0)
    try:
        for offset in range(BURST):
            step.submit(env(_poison(contract_topic, offset), offset=offset, tp=tp))
        # Every record handed over, none waited for: no flush, a delivery each (the former
        # sink waited for each record's acknowledgement inside send).
        assert sink.flushes == 0
        assert len(sink.deliveries) == BURST

        def all_done() -> bool:
            step.poll()  # never waits: marks done what the cluster acknowledged
            return len(done.items) == BURST

        wait_for(all_done, "every dead letter acknowledged")
        assert sink.flushes == 0
        assert sorted(done.offsets) == list(range(BURST))
        step.join(timeout=DEADLINE_S)  # nothing left in flight: nothing to wait for
        assert sink.flushes == 0
    finally:
        step.close()
        sink.close()
    records = read_topic(kafka_broker.bootstrap, f"{contract_topic}{DLQ_SUFFIX}", BURST)
    assert sorted(int(dict(r.headers)["casewatch-original-offset"]) for r in records) == list(
        range(BURST)
    )
    assert registry.get_sample_value("casewatch_dead_letter_total", {"reason": "not_json"}) == BURST
    assert _held(registry, "refused") == 0 and _held(registry, "backlog") == 0


def test_the_join_waits_once_for_the_dead_letters_in_flight(
    kafka_broker: ContractBroker, contract_topic: str
) -> None:
    sink = CountingSink(KafkaDeadLetterQueue(source_config(kafka_broker, contract_topic)))
    done = Recorder()
    step = _step(sink, CollectorRegistry(), done)
    tp = TopicPartition(contract_topic, 0)
    try:
        for offset in range(BURST):
            step.submit(env(_poison(contract_topic, offset), offset=offset, tp=tp))
        step.join(timeout=DEADLINE_S)
    finally:
        step.close()
        sink.close()
    assert sink.flushes <= 1  # one flush for the whole burst (none if all were acknowledged)
    assert sorted(done.offsets) == list(range(BURST))


def test_with_the_dead_letter_topic_unwritable_the_offsets_stay_uncommitted_and_counted(
    gone_broker_sink: CountingSink,
) -> None:
    sink = gone_broker_sink
    registry, done = CollectorRegistry(), Recorder()
    step = _step(sink, registry, done)
    tp = TopicPartition(OUTAGE_TOPIC, 0)
    n = 5
    # The broker is gone, yet each record is taken at once: nothing waits per record.
    for offset in range(1, n + 1):
        step.submit(env(_poison(OUTAGE_TOPIC, offset), offset=offset, tp=tp))
    assert sink.flushes == 0 and len(sink.deliveries) == n

    def every_write_failed_and_was_sent_again() -> bool:
        step.poll()
        return _held(registry, "refused") >= n

    wait_for(every_write_failed_and_was_sent_again, "the failed dead letters counted")
    assert done.items == []  # a dead letter not written keeps its record uncommitted
    assert len(sink.deliveries) >= 2 * n  # each sent again after its write failed
    assert step.dead_letters_pending == n
    step.join(timeout=0.5)
    assert done.items == []
    assert _held(registry, "unacknowledged") == 1
    step.close()


def test_past_the_bound_of_dead_letters_in_flight_poison_is_rejected(
    gone_broker_sink: CountingSink,
) -> None:
    registry, done = CollectorRegistry(), Recorder()
    bound = 3
    step = _step(gone_broker_sink, registry, done, max_pending=bound)
    tp = TopicPartition(OUTAGE_TOPIC, 0)
    for offset in range(1, bound + 1):
        step.submit(env(_poison(OUTAGE_TOPIC, offset), offset=offset, tp=tp))
    for _ in range(2):  # offered again: rejected again, counted once
        with pytest.raises(MessageRejected, match="dead letters await acknowledgement"):
            step.submit(env(_poison(OUTAGE_TOPIC, bound + 1), offset=bound + 1, tp=tp))
    assert _held(registry, "backlog") == 1
    assert step.dead_letters_pending == bound and done.items == []
    # A valid record is not held back by the poison's backlog.
    step.submit(env(raw(_valid_turn(), offset=bound + 2, tp=tp), offset=bound + 2, tp=tp))
    step.close()


def _valid_turn() -> bytes:
    from tests.fixtures.databases import make_turn

    return make_turn("ok-1").model_dump_json().encode()


def test_the_bytes_of_the_records_held_are_bounded_too(gone_broker_sink: CountingSink) -> None:
    """Each record is kept to be sent again: a burst of large poison is bounded in bytes,
    and one record is always taken, however large."""
    held: list[str] = []
    done = Recorder()
    pending = PendingDeadLetters(gone_broker_sink, done, held.append, limit=100, byte_limit=1000)
    tp = TopicPartition(OUTAGE_TOPIC, 0)
    for offset in (1, 2):
        pending.make_room()
        message = env(raw(b"x" * 600, offset=offset, tp=tp), offset=offset, tp=tp)
        exc = InvalidEvent("too_large", "600 bytes")
        pending.add(message, exc, gone_broker_sink.send(message.payload, exc.reason, exc.detail))
    with pytest.raises(MessageRejected):
        pending.make_room()
    assert held == ["backlog"] and len(pending) == 2 and done.items == []


def test_the_held_reasons_are_the_ones_the_exporter_exports_at_zero() -> None:
    from monitor.metrics.exporter import DEAD_LETTER_HELD_WHY
    from monitor.stream.steps import base

    held = {base.HELD_REFUSED, base.HELD_UNAVAILABLE, base.HELD_UNACKNOWLEDGED, base.HELD_BACKLOG}
    assert held == set(DEAD_LETTER_HELD_WHY)
