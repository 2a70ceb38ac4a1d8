"""Holding a partition on a record batch the consumer cannot read, on the consumer itself.

``consumers/unreadable.py`` keeps the bookkeeping (which partition, since which offset, when to
retry); this applies it to a kafka-python consumer: on an ``UnreadableBatchError`` the fetched
data of the partition is dropped (so a retry fetches the batch again, from its position, which
stayed on it) and the partition is paused; when its retry is due it is resumed, unless the
caller paused it too (``consumers/partition_pauses.py``); a record delivered at or past the
stuck offset releases it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import structlog

from consumers._kafka import UnreadableBatchError, from_kafka_tp, to_kafka_tp
from consumers._kafka_fetch import describe_unreadable, discard_fetched
from consumers.partition_pauses import PartitionPauses
from consumers.records import TopicPartition, partition_names
from consumers.unreadable import UnreadableBatch, UnreadablePartitions
from monitor.runtime.clock import Clock

log = structlog.get_logger(__name__)


class UnreadableHolds:
    def __init__(
        self, clock: Clock, backoff_s: tuple[float, float], pauses: PartitionPauses
    ) -> None:
        self._clock = clock
        self._stuck = UnreadablePartitions(clock, *backoff_s)
        self._pauses = pauses

    def __bool__(self) -> bool:
        return bool(self._stuck)

    def held(self) -> set[TopicPartition]:
        """Stuck partitions whose retry is not due yet (kept paused)."""
        return self._stuck.held()

    def snapshot(self) -> dict[TopicPartition, UnreadableBatch]:
        return self._stuck.snapshot()

    def hold(self, consumer: Any, exc: UnreadableBatchError) -> UnreadableBatch:
        """Pause the partition on its unread batch (its position stays there, so nothing past
        it is read or committed) and schedule a fresh fetch of it after a backoff."""
        tp = exc.tp
        discard_fetched(consumer, tp)
        batch = self._stuck.failed(
            tp, exc.offset, exc.reason, describe_unreadable(exc.reason, exc.cause)
        )
        ktp = to_kafka_tp(tp)
        if ktp in consumer.assignment():
            consumer.pause(ktp)
        log.error(
            "unreadable record batch: partition held back, other partitions go on",
            topic=tp.topic,
            partition=tp.partition,
            offset=exc.offset,
            reason=exc.reason,
            attempts=batch.attempts,
            retry_in_s=round(batch.retry_at - self._clock.monotonic(), 1),
            error=batch.error,
        )
        return batch

    def sync(self, consumer: Any) -> None:
        """Keep held partitions paused; resume those whose retry is due (unless the caller
        paused them too): their next fetch reads the batch again."""
        stuck = self._stuck.snapshot()
        held = self._stuck.held()
        assigned = consumer.assignment()
        paused = set(consumer.paused())
        hold = {to_kafka_tp(tp) for tp in held} & assigned - paused
        retry = {to_kafka_tp(tp) for tp in self._pauses.to_retry(set(stuck) - held)} & paused
        if hold:
            consumer.pause(*hold)
        if retry:
            names = partition_names(map(from_kafka_tp, retry))
            log.info("retrying unreadable partitions", partitions=names)
            consumer.resume(*retry)

    def delivered(self, tp: TopicPartition, offset: int) -> None:
        """A record of ``tp`` at ``offset`` came through: released if it was held before it."""
        was = self._stuck.read(tp, offset)
        if was is not None:
            log.info(
                "unreadable partition readable again",
                topic=was.topic,
                partition=was.partition,
                offset=was.offset,
                attempts=was.attempts,
            )

    def forget(self, tps: Iterable[TopicPartition]) -> None:
        """Partitions no longer ours: their new owner meets the batch on its own."""
        self._stuck.forget(tps)
