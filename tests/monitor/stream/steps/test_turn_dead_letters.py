"""The store step (a turn the database refuses) and the redact step (a turn too large to
redact) with the Kafka dead-letter queue on a real broker, as the decode step sends poison:
a dead letter goes out without waiting on the loop's thread and its turn is done only once it
is acknowledged; a dead letter that is not written holds its turn uncommitted and counted;
past the bound of dead letters in flight the step refuses more work."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from consumers.dlq import HEADER_OFFSET, HEADER_REASON, KafkaDeadLetterQueue
from consumers.records import TopicPartition
from monitor.errors import MessageRejected
from monitor.metrics.exporter import Metrics
from monitor.redaction import RedactionPolicy, Redactor
from monitor.runtime.clock import ManualClock
from monitor.sampling.judging_redaction import JudgingRedaction
from monitor.schema.turn import TurnEvent
from monitor.storage.audit import counts
from monitor.storage.store import Store
from monitor.stream.recorder import StreamRecorder
from monitor.stream.steps.base import Envelope, JudgedTurn
from monitor.stream.steps.decisions import TurnDecisions
from monitor.stream.steps.redact import RedactStep
from monitor.stream.steps.store import StoreStep
from tests.fixtures import refused_rows
from tests.fixtures.broker import DLQ_SUFFIX, ContractBroker
from tests.fixtures.databases import make_turn, make_verdict
from tests.monitor.stream.steps.helpers import OUTAGE_TOPIC, CountingSink, Recorder, env
from tests.support.kafka import read_topic, source_config
from tests.support.waiting import DEADLINE_S, wait_for

pytestmark = pytest.mark.integration

# A turn larger than the redactor takes (its ``max_chars``).
MAX_CHARS = 200


def _held(registry: CollectorRegistry, why: str) -> float:
    return registry.get_sample_value("casewatch_dead_letters_held_total", {"why": why}) or 0.0


def _dead_lettered(registry: CollectorRegistry, reason: str) -> float:
    return registry.get_sample_value("casewatch_dead_letter_total", {"reason": reason}) or 0.0


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.migrate()
    yield store
    store.close()


def _good(offset: int, tp: TopicPartition) -> Envelope[JudgedTurn]:
    turn = make_turn(f"e{offset}")
    return env(JudgedTurn(turn, make_verdict(turn)), offset=offset, tp=tp)


def _refused(offset: int, tp: TopicPartition) -> Envelope[JudgedTurn]:
    turn, verdict = refused_rows.refused_pair("sqlite", "check_constraint", f"bad-{offset}")
    return env(JudgedTurn(turn, verdict), offset=offset, tp=tp)


def _store_step(
    store: Store, sink: CountingSink, registry: CollectorRegistry, done: Recorder, **kw: int
) -> StoreStep:
    metrics = StreamRecorder(Metrics(registry))
    return StoreStep(done, store, metrics, ManualClock(), dlq=sink, **kw)


def _too_large(offset: int, tp: TopicPartition) -> Envelope[TurnEvent]:
    return env(make_turn(f"big-{offset}", reference="x" * (2 * MAX_CHARS)), offset=offset, tp=tp)


def _redact_step(
    sink: CountingSink, registry: CollectorRegistry, nxt: Recorder, done: Recorder, **kw: int
) -> RedactStep:
    redaction = JudgingRedaction(Redactor(RedactionPolicy(max_chars=MAX_CHARS)), True)
    decisions = TurnDecisions(100_000, redaction=redaction)
    metrics = StreamRecorder(Metrics(registry))
    return RedactStep(nxt, done, decisions, metrics, dlq=sink, **kw)


# -- the store step: a turn the database refuses ------------------------------------------------


def test_an_unstorable_turn_is_done_once_its_dead_letter_is_acknowledged(
    kafka_broker: ContractBroker, contract_topic: str, sqlite_store: Store
) -> None:
    sink = CountingSink(KafkaDeadLetterQueue(source_config(kafka_broker, contract_topic)))
    registry, done = CollectorRegistry(), Recorder()
    step = _store_step(sqlite_store, sink, registry, done)
    tp = TopicPartition(contract_topic, 0)
    try:
        for message in (_good(0, tp), _refused(1, tp), _good(2, tp)):
            step.submit(message)
        step.poll()
        # Sent without waiting for the broker; the stored turns are done, the refused one
        # only once the broker has its dead letter.
        assert sink.flushes == 0 and len(sink.deliveries) == 1
        assert done.offsets == [0, 2] and step.dead_letters_pending == 1

        def acknowledged() -> bool:
            step.poll()  # never waits
            return 1 in done.offsets

        wait_for(acknowledged, "the unstorable turn's dead letter acknowledged")
        assert sink.flushes == 0 and step.dead_letters_pending == 0
        # The turn goes on as the judged turn (an export step after the store reads it).
        assert isinstance(done.items[-1].payload, JudgedTurn)
        step.join(timeout=DEADLINE_S)  # nothing in flight: nothing to wait for
        assert sink.flushes == 0
    finally:
        step.close()
        sink.close()
    records = read_topic(kafka_broker.bootstrap, f"{contract_topic}{DLQ_SUFFIX}", 1)
    headers = dict(records[0].headers)
    assert headers[HEADER_REASON] == b"unstorable" and headers[HEADER_OFFSET] == b"1"
    assert TurnEvent.model_validate_json(records[0].value).event_id == "bad-1"
    assert counts(sqlite_store)["verdicts"] == 2
    assert _dead_lettered(registry, "unstorable") == 1
    assert _held(registry, "refused") == 0 and _held(registry, "backlog") == 0


def test_the_store_join_waits_once_for_the_dead_letters_in_flight(
    kafka_broker: ContractBroker, contract_topic: str, sqlite_store: Store
) -> None:
    sink = CountingSink(KafkaDeadLetterQueue(source_config(kafka_broker, contract_topic)))
    done = Recorder()
    step = _store_step(sqlite_store, sink, CollectorRegistry(), done)
    tp = TopicPartition(contract_topic, 0)
    try:
        for offset in range(5):
            step.submit(_refused(offset, tp))
        step.join(timeout=DEADLINE_S)
    finally:
        step.close()
        sink.close()
    assert sink.flushes <= 1  # one flush for all of them (none if all were acknowledged)
    assert sorted(done.offsets) == list(range(5)) and len(done.joins) == 1


def test_with_the_dead_letter_topic_unwritable_an_unstorable_turn_stays_uncommitted_and_counted(
    gone_broker_sink: CountingSink, sqlite_store: Store
) -> None:
    sink = gone_broker_sink
    registry, done = CollectorRegistry(), Recorder()
    step = _store_step(sqlite_store, sink, registry, done)
    tp = TopicPartition(OUTAGE_TOPIC, 0)
    step.submit(_good(1, tp))
    step.submit(_refused(2, tp))
    step.poll()  # the broker is gone, yet nothing waits for it
    assert sink.flushes == 0 and done.offsets == [1]

    def failed_and_sent_again() -> bool:
        step.poll()
        return _held(registry, "refused") >= 1

    wait_for(failed_and_sent_again, "the failed dead letter counted")
    assert done.offsets == [1]  # the refused turn is held, not lost
    assert len(sink.deliveries) >= 2 and step.dead_letters_pending == 1
    step.join(timeout=0.5)
    assert done.offsets == [1]
    assert _held(registry, "unacknowledged") == 1
    step.close()


def test_past_the_bound_of_dead_letters_in_flight_the_store_step_takes_no_more_work(
    gone_broker_sink: CountingSink, sqlite_store: Store
) -> None:
    registry, done = CollectorRegistry(), Recorder()
    step = _store_step(sqlite_store, gone_broker_sink, registry, done, max_pending=1, batch_size=4)
    tp = TopicPartition(OUTAGE_TOPIC, 0)
    step.submit(_refused(1, tp))
    step.submit(_refused(2, tp))
    step.poll()  # one dead letter in flight: the second refused turn waits for room
    assert step.dead_letters_pending == 1 and step.buffered == 1
    assert _held(registry, "backlog") == 1
    for offset in (3, 4, 5):
        step.submit(_good(offset, tp))
    for _ in range(2):  # offered again: rejected again, the episode counted once
        with pytest.raises(MessageRejected):
            step.submit(_good(6, tp))
    assert _held(registry, "backlog") == 1
    # Nothing further is written while the refused turn is held; nothing is done.
    assert counts(sqlite_store)["verdicts"] == 0 and done.items == []
    step.close()


# -- the redact step: a turn too large to redact ------------------------------------------------


def test_a_turn_too_large_to_redact_is_done_once_its_dead_letter_is_acknowledged(
    kafka_broker: ContractBroker, contract_topic: str
) -> None:
    sink = CountingSink(KafkaDeadLetterQueue(source_config(kafka_broker, contract_topic)))
    registry, nxt, done = CollectorRegistry(), Recorder(), Recorder()
    step = _redact_step(sink, registry, nxt, done)
    tp = TopicPartition(contract_topic, 0)
    try:
        step.submit(_too_large(4, tp))
        assert sink.flushes == 0 and len(sink.deliveries) == 1
        assert done.items == [] and nxt.items == []  # never passed on, not done yet

        def acknowledged() -> bool:
            step.poll()  # never waits
            return done.offsets == [4]

        wait_for(acknowledged, "the dead letter acknowledged")
        assert isinstance(done.items[0].payload, TurnEvent) and nxt.items == []
        step.join(timeout=DEADLINE_S)
        assert sink.flushes == 0 and len(nxt.joins) == 1
    finally:
        step.close()
        sink.close()
    records = read_topic(kafka_broker.bootstrap, f"{contract_topic}{DLQ_SUFFIX}", 1)
    headers = dict(records[0].headers)
    assert headers[HEADER_REASON] == b"redaction_too_large" and headers[HEADER_OFFSET] == b"4"
    assert _dead_lettered(registry, "redaction_too_large") == 1


def test_the_redact_join_waits_once_for_the_dead_letters_in_flight(
    kafka_broker: ContractBroker, contract_topic: str
) -> None:
    sink = CountingSink(KafkaDeadLetterQueue(source_config(kafka_broker, contract_topic)))
    nxt, done = Recorder(), Recorder()
    step = _redact_step(sink, CollectorRegistry(), nxt, done)
    tp = TopicPartition(contract_topic, 0)
    try:
        for offset in range(5):
            step.submit(_too_large(offset, tp))
        step.join(timeout=DEADLINE_S)
    finally:
        step.close()
        sink.close()
    assert sink.flushes <= 1
    assert sorted(done.offsets) == list(range(5)) and len(nxt.joins) == 1


def test_with_the_dead_letter_topic_unwritable_a_turn_too_large_stays_uncommitted_and_counted(
    gone_broker_sink: CountingSink,
) -> None:
    sink = gone_broker_sink
    registry, nxt, done = CollectorRegistry(), Recorder(), Recorder()
    step = _redact_step(sink, registry, nxt, done)
    tp = TopicPartition(OUTAGE_TOPIC, 0)
    step.submit(_too_large(1, tp))  # the broker is gone, yet the turn is taken at once
    assert sink.flushes == 0 and len(sink.deliveries) == 1

    def failed_and_sent_again() -> bool:
        step.poll()
        return _held(registry, "refused") >= 1

    wait_for(failed_and_sent_again, "the failed dead letter counted")
    assert done.items == [] and nxt.items == []
    assert len(sink.deliveries) >= 2 and step.dead_letters_pending == 1
    step.join(timeout=0.5)
    assert done.items == []
    assert _held(registry, "unacknowledged") == 1
    step.close()


def test_past_the_bound_of_dead_letters_in_flight_a_turn_too_large_is_rejected(
    gone_broker_sink: CountingSink,
) -> None:
    registry, nxt, done = CollectorRegistry(), Recorder(), Recorder()
    bound = 2
    step = _redact_step(gone_broker_sink, registry, nxt, done, max_pending=bound)
    tp = TopicPartition(OUTAGE_TOPIC, 0)
    for offset in range(1, bound + 1):
        step.submit(_too_large(offset, tp))
    for _ in range(2):  # offered again: rejected again, counted once
        with pytest.raises(MessageRejected, match="dead letters await acknowledgement"):
            step.submit(_too_large(bound + 1, tp))
    assert _held(registry, "backlog") == 1
    assert step.dead_letters_pending == bound and done.items == []
    # A turn that can be redacted is not held back by the backlog.
    step.submit(env(make_turn("ok-1"), offset=bound + 2, tp=tp))
    assert nxt.offsets == [bound + 2]
    step.close()
