"""A corrupt batch on one partition: the partition is held on it and re-fetched with backoff,
its error names topic, partition and offset, and the other partition is read to its end
meanwhile. Part of the contract suite (every broker of ``kafka_broker``, broker quirks off):
the broker stores and serves the batch as the producer wrote it, as Kafka does."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.record import default_records
from structlog.testing import capture_logs

from consumers._kafka import KafkaProducer
from consumers.kafka_source import KafkaTurnSource
from consumers.records import TopicPartition
from consumers.tansu import create_topics, delete_topics
from consumers.unreadable import CORRUPT, UnreadableBatch
from monitor.config.kafka import KafkaConfig
from tests.fixtures.broker import ContractBroker

pytestmark = pytest.mark.integration


@pytest.fixture
def topic(kafka_broker: ContractBroker) -> Iterator[str]:
    name = f"corrupt.{uuid.uuid4().hex[:12]}"
    create_topics(kafka_broker.bootstrap, [name], 2)
    yield name
    delete_topics(kafka_broker.bootstrap, [name])


def _send(bootstrap: str, topic: str, partition: int, values: list[bytes], **options: Any) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **options)
    try:
        futures = [producer.send(topic, value=v, partition=partition) for v in values]
        producer.flush(timeout=30)
        for future in futures:
            future.get(timeout=30)
    finally:
        producer.close(timeout=10)


def test_a_corrupt_batch_holds_its_partition_and_the_other_is_read(
    kafka_broker: ContractBroker,
    topic: str,
    sources: list[KafkaTurnSource],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bootstrap = kafka_broker.bootstrap
    _send(bootstrap, topic, 0, [b"ok-%d" % i for i in range(5)])
    # A batch flagged gzip whose payload is not gzip, with a valid CRC (computed after the
    # "compression"): it passes every check until it is decompressed.
    with monkeypatch.context() as patched:
        patched.setattr(default_records, "gzip_encode", lambda *_a, **_k: b"\x1f\x8bnot gzip")
        _send(bootstrap, topic, 0, [b"lost?-%d" % i for i in range(3)], compression_type="gzip")
    _send(bootstrap, topic, 1, [b"other-%d" % i for i in range(10)])
    config = KafkaConfig(
        bootstrap_servers=[bootstrap],
        topics=[topic],
        group_id=f"corrupt-{uuid.uuid4().hex[:8]}",
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
        max_poll_interval_ms=6000,
        broker_quirks="none",
    )
    source = KafkaTurnSource(config, unreadable_backoff_s=(0.2, 0.4))
    sources.append(source)
    failures: list[UnreadableBatch] = []
    source.set_unreadable_listener(failures.append)
    got: dict[int, list[bytes | None]] = {0: [], 1: []}
    with capture_logs() as logs:
        # Until the batch was fetched again twice after the first failure and partition 1 is
        # read to its end: bounded by the poll count, not by time.
        for _ in range(500):
            for msg in source.poll(0.1, 100):
                got[msg.partition].append(msg.value)
            if len(failures) >= 3 and len(got[1]) == 10:
                break
    assert got == {0: [b"ok-%d" % i for i in range(5)], 1: [b"other-%d" % i for i in range(10)]}
    assert [(f.topic, f.partition, f.offset, f.reason) for f in failures[:3]] == [
        (topic, 0, 5, CORRUPT)
    ] * 3
    assert [f.attempts for f in failures[:3]] == [1, 2, 3]
    [stuck] = source.unreadable().values()
    assert stuck.tp == TopicPartition(topic, 0) and stuck.offset == 5
    assert "BadGzipFile" in stuck.error
    # Held back by the source, not paused by the caller: a backpressure resume cannot undo it.
    assert source.paused() == set()
    errors = [e for e in logs if e["event"].startswith("unreadable record batch")]
    assert errors and errors[0]["offset"] == 5 and errors[0]["partition"] == 0
    assert errors[0]["log_level"] == "error"


def test_a_batch_readable_on_a_retry_is_delivered_and_the_partition_released(
    kafka_broker: ContractBroker,
    topic: str,
    sources: list[KafkaTurnSource],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bootstrap = kafka_broker.bootstrap
    values = [b"zipped-%d" % i for i in range(4)]
    _send(bootstrap, topic, 0, values, compression_type="gzip")
    real = default_records.gzip_decode
    calls: list[int] = []

    def flaky(payload: Any) -> bytes:  # fails twice, as a transient corruption in transit would
        calls.append(1)
        if len(calls) <= 2:
            raise OSError("simulated bad read")
        return bytes(real(payload))

    monkeypatch.setattr(default_records, "gzip_decode", flaky)
    config = KafkaConfig(
        bootstrap_servers=[bootstrap],
        topics=[topic],
        group_id=f"retry-{uuid.uuid4().hex[:8]}",
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
        max_poll_interval_ms=6000,
        broker_quirks="none",
    )
    source = KafkaTurnSource(config, unreadable_backoff_s=(0.1, 0.2))
    sources.append(source)
    failures: list[UnreadableBatch] = []
    source.set_unreadable_listener(failures.append)
    got: list[bytes | None] = []
    for _ in range(500):
        got += [m.value for m in source.poll(0.1, 100)]
        if len(got) == len(values):
            break
    assert got == values
    assert [(f.offset, f.attempts) for f in failures] == [(0, 1), (0, 2)]
    assert source.unreadable() == {}
