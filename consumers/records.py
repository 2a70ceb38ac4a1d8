"""The record every source yields: one raw message, before decoding.

Deliberately independent of kafka-python so the pipeline, the file source and the tests never
import a client library.
"""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int


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
