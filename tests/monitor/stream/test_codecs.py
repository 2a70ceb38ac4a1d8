"""Every Kafka codec, from librdkafka (confluent-kafka) and from kafka-python, is read and every
turn judged once: the producer picks the compression, not the operator.

Each test writes one codec into a 4-partition topic: keyed and unkeyed, with and without
headers, from both clients, then runs the daemon (a plain Kafka consumer, broker quirks off)
until every offset is committed. Part of the contract suite: every broker of ``kafka_broker``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer
from kafka.record import default_records

from consumers._kafka import KafkaProducer, kafka
from consumers.dlq import KafkaDeadLetterQueue
from consumers.kafka_source import KafkaTurnSource
from consumers.tansu import create_topics, delete_topics
from monitor.cli import main
from monitor.storage.store import Store
from tests.fixtures.broker import DLQ_SUFFIX, ContractBroker
from tests.fixtures.databases import make_turn
from tests.support.daemon import kafka_settings, rows_per_event, running
from tests.support.kafka import committed_offset, read_topic
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PARTITIONS = 4
PER_SHAPE = 6  # turns per (client, keyed, headers) combination: 48 per codec


def test_kafka_python_has_every_codec_library() -> None:
    codec = kafka.codec
    assert (codec.has_gzip(), codec.has_snappy(), codec.has_lz4(), codec.has_zstd()) == (
        True,
        True,
        True,
        True,
    )


@pytest.fixture
def four_partitions(kafka_broker: ContractBroker) -> Iterator[str]:
    topic = f"codecs.{uuid.uuid4().hex[:12]}"
    create_topics(kafka_broker.bootstrap, [topic], PARTITIONS, dlq_suffix=DLQ_SUFFIX)
    yield topic
    delete_topics(kafka_broker.bootstrap, [topic, f"{topic}{DLQ_SUFFIX}"])


def _shapes(prefix: str) -> Iterator[tuple[str, bytes | None, list[tuple[str, bytes]]]]:
    """(event id, key, headers) for every combination of keyed/unkeyed and headers/none."""
    for keyed in (True, False):
        for with_headers in (True, False):
            for i in range(PER_SHAPE):
                event_id = f"{prefix}-k{int(keyed)}h{int(with_headers)}-{i}"
                key = f"conv-{event_id}".encode() if keyed else None
                headers = [("source", b"codec-test"), ("trace", event_id.encode())]
                yield event_id, key, headers if with_headers else []


def _value(event_id: str) -> bytes:
    return make_turn(event_id).model_dump_json().encode()


def produce_librdkafka(bootstrap: str, topic: str, codec: str, prefix: str) -> set[str]:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "linger.ms": 20,  # batches of several records, as producers under load send
            "acks": "all",
            "log_level": 3,
        }
    )
    errors: list[str] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    ids = set()
    for event_id, key, headers in _shapes(prefix):
        # Unkeyed records are spread over the partitions by librdkafka's sticky partitioner.
        producer.produce(
            topic, value=_value(event_id), key=key, headers=headers, on_delivery=delivered
        )
        ids.add(event_id)
    assert producer.flush(30) == 0, "librdkafka did not deliver everything"
    assert not errors, errors
    return ids


def produce_kafka_python(bootstrap: str, topic: str, codec: str, prefix: str) -> set[str]:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        linger_ms=20,
        compression_type=None if codec == "none" else codec,
    )
    try:
        ids = set()
        futures = []
        for event_id, key, headers in _shapes(prefix):
            futures.append(producer.send(topic, value=_value(event_id), key=key, headers=headers))
            ids.add(event_id)
        producer.flush(timeout=30)
        for future in futures:
            future.get(timeout=30)
    finally:
        producer.close(timeout=10)
    return ids


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_from_both_clients_is_judged_once(
    codec: str, kafka_broker: ContractBroker, four_partitions: str, tmp_path: Path
) -> None:
    bootstrap, topic = kafka_broker.bootstrap, four_partitions
    expected = produce_librdkafka(bootstrap, topic, codec, f"rdk-{codec}")
    expected |= produce_kafka_python(bootstrap, topic, codec, f"kp-{codec}")
    assert len(expected) == 2 * 2 * 2 * PER_SHAPE
    db_url = f"sqlite:///{tmp_path / 'casewatch.db'}"
    settings = kafka_settings(bootstrap, topic, db_url)
    store = Store(db_url)
    store.migrate()
    group = settings.kafka.group_id
    source = KafkaTurnSource(settings.kafka)
    with running(settings, source, KafkaDeadLetterQueue(settings.kafka), store) as h:
        # Offsets are contiguous from 0 (no transactions), so the committed offsets add up to
        # the number of records once every partition is committed to its end.
        wait_for(
            lambda: (
                sum(committed_offset(bootstrap, group, topic, p) or 0 for p in range(PARTITIONS))
                == len(expected)
            ),
            "every partition committed to its end",
        )
        assert rows_per_event(store) == dict.fromkeys(expected, 1)
        judged = sum(
            h.sample("casewatch_turns_judged_total", {"assistant": "helpdesk", "band": b})
            for b in ("severe", "moderate", "minor", "none", "judge_failed")
        )
        assert judged == len(expected)
        assert h.sample("casewatch_turns_consumed_total", {"topic": topic}) == len(expected)
        dead = [
            s for m in h.registry.collect() if m.name == "casewatch_dead_letter" for s in m.samples
        ]
        assert sum(s.value for s in dead if s.name.endswith("_total")) == 0
        for reason in ("codec_unavailable", "corrupt"):
            labels = {"topic": topic, "reason": reason}
            assert h.sample("casewatch_unreadable_batches_total", labels) == 0
    store.close()


@pytest.mark.parametrize("codec", ["snappy", "lz4", "zstd"])
def test_produce_writes_the_compression_asked_for(
    codec: str,
    kafka_broker: ContractBroker,
    contract_topic: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = tmp_path / "turns.jsonl"
    values = [_value(f"cli-{i}") for i in range(5)]
    data.write_bytes(b"".join(v + b"\n" for v in values))
    args = ["produce", str(data), "--topic", contract_topic, "--bootstrap", kafka_broker.bootstrap]
    result = CliRunner().invoke(main, [*args, "--compression", codec])
    assert result.exit_code == 0, result.output
    # Reading the topic back decodes its batches with that codec's decoder.
    name = f"{codec}_decode"
    decoder = getattr(default_records, name)
    calls: list[int] = []

    def counting(payload: bytes) -> bytes:
        calls.append(len(payload))
        return bytes(decoder(payload))

    monkeypatch.setattr(default_records, name, counting)
    assert [r.value for r in read_topic(kafka_broker.bootstrap, contract_topic, 5)] == values
    assert calls, f"no batch was {codec}-compressed"
