"""Which partitions are paused, and for whom: the caller (backpressure) or an unreadable batch.

kafka-python keeps one paused set per consumer; two parties pause partitions for different
reasons and must not undo each other. A partition held on an unreadable batch stays paused
when the caller resumes it (its retry is not due), and one the caller paused stays paused when
its retry comes (the caller has not resumed it). ``paused()`` shows the caller only its own.
Pure bookkeeping: the source applies what it returns to the consumer.
"""

from __future__ import annotations

from collections.abc import Iterable, Set

from consumers.records import TopicPartition


class PartitionPauses:
    def __init__(self) -> None:
        self._caller: set[TopicPartition] = set()

    @property
    def by_caller(self) -> set[TopicPartition]:
        return set(self._caller)

    def pause(self, tps: Iterable[TopicPartition]) -> set[TopicPartition]:
        """The caller pauses ``tps``; returns what to pause on the consumer."""
        tps = set(tps)
        self._caller |= tps
        return tps

    def resume(
        self, tps: Iterable[TopicPartition], held: Set[TopicPartition]
    ) -> set[TopicPartition]:
        """The caller resumes ``tps``; returns what to resume on the consumer (not the held)."""
        tps = set(tps)
        self._caller -= tps
        return tps - held

    def visible(
        self, paused: Set[TopicPartition], held: Set[TopicPartition]
    ) -> set[TopicPartition]:
        """What the caller sees as paused, of the consumer's ``paused`` set."""
        return set(paused) - (set(held) - self._caller)

    def to_retry(self, due: Set[TopicPartition]) -> set[TopicPartition]:
        """Of the held partitions whose retry is ``due``, those to resume now."""
        return set(due) - self._caller

    def forget(self, tps: Iterable[TopicPartition]) -> None:
        self._caller -= set(tps)

    def clear(self) -> None:
        self._caller.clear()
