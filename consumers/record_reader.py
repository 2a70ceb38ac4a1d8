"""One Kafka record read back by its place (topic, partition, offset): how a turn kept for
feedback as its record's place (``docs/outcomes.md``, "Feedback can trigger judging") is read
when a negative feedback asks for it to be judged.

A consumer of no group, opened on the first read and kept for the next: assigned the one
partition, positioned at the offset, never committing. A record Kafka no longer has (its offset
below the partition's first, as retention or compaction left it) is ``RecordGone("expired")``;
the broker unreachable, or no record within the timeout, ``BrokerError`` (tried again later).
"""

from __future__ import annotations

import time
from typing import Any

from consumers._kafka import KafkaConsumer, broker_errors, client_options, to_kafka_tp
from consumers.records import TopicPartition
from monitor.config.kafka import KafkaConfig
from monitor.errors import BrokerError, RecordGone

READ_TIMEOUT_S = 10.0


class KafkaRecordReader:
    def __init__(self, config: KafkaConfig, timeout_s: float = READ_TIMEOUT_S) -> None:
        self._config = config
        self._timeout_s = timeout_s
        self._servers = list(config.bootstrap_servers)
        self._consumer: Any = None

    def _open(self) -> Any:
        if self._consumer is None:
            with broker_errors("connecting the record reader", self._servers):
                self._consumer = KafkaConsumer(
                    **client_options(self._config),
                    group_id=None,
                    enable_auto_commit=False,
                    auto_offset_reset="earliest",
                    max_poll_records=1,
                    fetch_max_wait_ms=self._config.fetch_max_wait_ms,
                )
        return self._consumer

    def read(self, topic: str, partition: int, offset: int) -> bytes | None:
        """The value of the record at ``offset`` of ``topic``'s ``partition``."""
        consumer = self._open()
        tp = to_kafka_tp(TopicPartition(topic, partition))
        where = f"{topic}[{partition}]@{offset}"
        with broker_errors(f"reading the record {where}", self._servers):
            consumer.assign([tp])
            first = int(consumer.beginning_offsets([tp])[tp])
            if offset < first:
                raise RecordGone("expired", f"{where}: the partition starts at {first} now")
            consumer.seek(tp, offset)
            deadline = time.monotonic() + self._timeout_s
            while time.monotonic() < deadline:
                for record in consumer.poll(timeout_ms=200, max_records=1).get(tp, []):
                    if int(record.offset) == offset:
                        value: bytes | None = record.value
                        return value
                    # Compacted away: the partition goes on past it.
                    raise RecordGone("expired", f"{where}: the next record is at {record.offset}")
        # Nothing came: a broker too slow to answer, or an offset the partition never reached
        # (Tansu's end offsets are not record offsets, so they are not asked first).
        raise BrokerError(f"reading the record {where}: nothing within {self._timeout_s:g} s")

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close(autocommit=False)
