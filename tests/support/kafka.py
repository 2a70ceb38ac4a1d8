"""The broker side of a Kafka test: a consumer's settings, reading a topic back, a group's
committed offset, a source polled until it has delivered enough.

Reads are bounded by the suite's hang guard (``tests.support.waiting.DEADLINE_S``) and return
what arrived: the test asserts on it.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from consumers._kafka import KafkaConsumer, KafkaTopicPartition
from consumers.kafka_source import KafkaTurnSource
from consumers.records import RawMessage
from consumers.tansu import EmbeddedBroker
from monitor.config.kafka import KafkaConfig
from tests.fixtures.broker import ContractBroker
from tests.support.waiting import DEADLINE_S


def source_config(
    broker: ContractBroker | EmbeddedBroker, topic: str, group: str | None = None, **kw: Any
) -> KafkaConfig:
    """A plain Kafka consumer of ``topic`` (the broker quirks off unless ``kw`` says)."""
    kw.setdefault("broker_quirks", "none")
    return KafkaConfig(
        bootstrap_servers=[broker.bootstrap],
        topics=[topic],
        group_id=group or f"g-{uuid.uuid4().hex[:8]}",
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
        max_poll_interval_ms=6000,
        **kw,
    )


def poll_until(source: KafkaTurnSource, n: int, max_records: int = 500) -> list[RawMessage]:
    """What ``source`` delivers until it has ``n`` records (or the hang guard ends the wait)."""
    out: list[RawMessage] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(out) < n and time.monotonic() < deadline:
        out += source.poll(0.2, max_records)
    return out


def read_topic(bootstrap: str, topic: str, n: int) -> list[Any]:
    """Up to ``n`` records of partition 0 of ``topic`` from its start (no group, no commit)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = KafkaTopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        records: list[Any] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(records) < n and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                records.extend(batch)
        return records
    finally:
        consumer.close(autocommit=False)


def committed_offset(bootstrap: str, group: str, topic: str, partition: int = 0) -> int | None:
    """The offset ``group`` committed on ``topic``'s ``partition`` (None: nothing yet)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        offset: int | None = consumer.committed(KafkaTopicPartition(topic, partition))
        return offset
    finally:
        consumer.close(autocommit=False)
