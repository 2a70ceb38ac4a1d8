"""Partitions whose next record batch cannot be read, held back and retried with backoff.

A batch the consumer cannot read (its codec's library is missing, it fails its CRC or does not
decompress) must neither be skipped (its turns would be lost: nothing may be committed past
data that was not read) nor stop the partitions that are readable. The partition is held
(paused) and read again after a backoff that doubles up to ``max_s``; it is released as soon as
a record at or after the stuck offset comes through. Pure bookkeeping with an injected clock;
the Kafka source (``consumers/kafka_source.py``) does the pausing.

Every failed attempt counts (``casewatch_unreadable_batches_total``), and attempts come at
least every ``max_s`` while a partition stays stuck, so an alert on the counter's increase
stays firing exactly as long as the partition is stuck.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from consumers.records import TopicPartition
from monitor.runtime.clock import Backoff, Clock

# Bounded values of the ``reason`` label.
CODEC_UNAVAILABLE = "codec_unavailable"  # the batch's compression library is not installed
CORRUPT = "corrupt"  # CRC mismatch, or the payload does not decompress / parse
REASONS: tuple[str, ...] = (CODEC_UNAVAILABLE, CORRUPT)

INITIAL_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0


@dataclass(frozen=True)
class UnreadableBatch:
    """The first record of ``topic``/``partition`` that could not be read, and why."""

    topic: str
    partition: int
    offset: int
    reason: str
    error: str  # what failed, with what to do about it
    attempts: int
    retry_at: float  # monotonic

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def describe(self) -> str:
        return (
            f"{self.topic}/{self.partition} at offset {self.offset} ({self.reason}, "
            f"{self.attempts} attempt(s)): {self.error}"
        )


UnreadableListener = Callable[[UnreadableBatch], None]


@runtime_checkable
class ReportsUnreadable(Protocol):
    """A source that can meet unreadable batches (Kafka; a file source cannot)."""

    def set_unreadable_listener(self, listener: UnreadableListener) -> None:
        """``listener`` is called (on the polling thread) at every failed read attempt."""
        ...

    def unreadable(self) -> dict[TopicPartition, UnreadableBatch]:
        """The partitions stuck now; thread-safe snapshot."""
        ...


class UnreadablePartitions:
    """Which partitions are stuck, since which offset, and when each is retried."""

    def __init__(
        self,
        clock: Clock,
        initial_s: float = INITIAL_BACKOFF_S,
        max_s: float = MAX_BACKOFF_S,
    ) -> None:
        if not 0 < initial_s <= max_s:
            raise ValueError(f"need 0 < initial_s <= max_s, got {initial_s}, {max_s}")
        self._clock = clock
        self._backoff = Backoff(initial_s, max_s)
        self._stuck: dict[TopicPartition, UnreadableBatch] = {}
        self._lock = threading.Lock()  # snapshots are read from the HTTP thread

    def failed(self, tp: TopicPartition, offset: int, reason: str, error: str) -> UnreadableBatch:
        """Record a failed read of ``tp`` at ``offset``; the same offset again backs off more."""
        if reason not in REASONS:
            raise ValueError(f"reason must be one of {REASONS}, got {reason!r}")
        with self._lock:
            before = self._stuck.get(tp)
            attempts = before.attempts + 1 if before is not None and before.offset == offset else 1
            wait = self._backoff.delay(attempts)
            batch = UnreadableBatch(
                tp.topic, tp.partition, offset, reason, error, attempts,
                self._clock.monotonic() + wait,
            )  # fmt: skip
            self._stuck[tp] = batch
            return batch

    def held(self) -> set[TopicPartition]:
        """Stuck partitions whose retry is not due yet (to keep paused)."""
        now = self._clock.monotonic()
        with self._lock:
            return {tp for tp, b in self._stuck.items() if b.retry_at > now}

    def read(self, tp: TopicPartition, offset: int) -> UnreadableBatch | None:
        """A record of ``tp`` at ``offset`` was delivered: if that is past the stuck point, the
        partition is readable again; returns what it was stuck on, else None."""
        with self._lock:
            batch = self._stuck.get(tp)
            if batch is None or offset < batch.offset:
                return None
            del self._stuck[tp]
            return batch

    def forget(self, tps: Iterable[TopicPartition]) -> None:
        """Partitions no longer ours: their new owner meets the batch on its own."""
        with self._lock:
            for tp in tps:
                self._stuck.pop(tp, None)

    def snapshot(self) -> dict[TopicPartition, UnreadableBatch]:
        with self._lock:
            return dict(self._stuck)

    def __len__(self) -> int:
        with self._lock:
            return len(self._stuck)
