"""The record every source yields: one raw message, before decoding.

Deliberately independent of kafka-python so the pipeline, the file source and the tests never
import a client library.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple, Protocol


class TopicPartition(NamedTuple):
    topic: str
    partition: int


def partition_names(tps: Iterable[TopicPartition]) -> list[str]:
    """Partitions as ``topic/partition``, sorted, for a log line."""
    return sorted(f"{tp.topic}/{tp.partition}" for tp in tps)


class RawMessage(NamedTuple):
    """One message as read from a source. ``offset`` is the message's own offset; the offset
    to commit once it is finished is ``offset + 1`` (Kafka semantics).

    A NamedTuple rather than a frozen dataclass: one is built per record consumed, and a
    tuple is built about three times faster (immutable all the same).
    """

    topic: str
    partition: int
    offset: int
    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp_ms: int | None = None

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class Delivery(Protocol):
    """A record handed to a sink that writes in the background (the dead-letter topic): the
    sender keeps it and asks, without waiting, whether the sink has the record yet."""

    def acknowledged(self) -> bool:
        """True once the record is durably written, False while it is in flight. Raises
        ``monitor.errors.TransportError`` when the write failed: send the record again."""
        ...


class Written:
    """The delivery of a sink that writes before ``send`` returns (a file)."""

    __slots__ = ()

    def acknowledged(self) -> bool:
        return True


WRITTEN = Written()
