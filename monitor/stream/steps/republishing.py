"""OTLP messages re-published by trace (``assembly.repartition``), held until acknowledged.

Each source message of a repartitioned topic is split by trace (``split_by_trace``, by the
assemble step) and each part sent, keyed by its trace id, to the topic's repartition topic
(``consumers.repartition.TraceRepublisher``), which the group reads too. The source message is
marked done only once every part is acknowledged; a part that fails is sent again (after
``REPUBLISH_RETRY_S``), and on a revoke or a stop what is not acknowledged stays uncommitted,
to be re-published by the next owner. Past ``MAX_REPUBLISHING`` source messages waiting for
acknowledgements, the assemble step refuses intake (backpressure).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import structlog

from consumers.records import RawMessage, TopicPartition
from consumers.repartition import Ack, KnowsPartitions, TraceRepublisher
from monitor.errors import TransportError
from monitor.runtime.clock import Clock
from monitor.stream.steps.base import DoneStep, Envelope

log = structlog.get_logger(__name__)

# Source messages whose re-published parts are not all acknowledged yet; past it, intake is
# refused (backpressure) until acknowledgements come.
MAX_REPUBLISHING = 1024
# A failed re-publish is tried again no sooner than this (the broker is down, or the topic
# missing: a send waits for its metadata).
REPUBLISH_RETRY_S = 2.0


class RepartitionMetrics(Protocol):
    def record_repartition(self, outcome: str, count: int = 1) -> None: ...


@dataclass
class _Republish:
    """A source message being re-published: its parts by trace id, and what became of each."""

    message: Envelope[RawMessage]
    topic: str
    parts: dict[str, bytes]
    acks: dict[str, Ack | None] = field(default_factory=dict)

    @property
    def acknowledged(self) -> bool:
        return len(self.acks) == len(self.parts) and all(
            a is not None and a.succeeded for a in self.acks.values()
        )


class Republishing:
    """The source messages being re-published, for the assemble step. ``topics``: source
    topic → its repartition topic; none without a ``republisher`` (a file has one partition:
    nothing to repartition)."""

    def __init__(
        self,
        republisher: TraceRepublisher | None,
        topics: Mapping[str, str],
        done: DoneStep,
        metrics: RepartitionMetrics,
        clock: Clock,
        partitions: KnowsPartitions | None,
    ) -> None:
        self._republisher = republisher
        self._topics = dict(topics) if republisher is not None else {}
        self._done = done
        self._metrics = metrics
        self._clock = clock
        self._partitions = partitions
        self._entries: list[_Republish] = []
        self._retry_at = 0.0
        self._topics_checked = not self._topics
        if self._topics:
            log.info(
                "re-publishing OTLP spans keyed by trace id",
                topics={src: dst for src, dst in sorted(self._topics.items())},
            )

    def target(self, topic: str) -> str | None:
        """The repartition topic of ``topic``; None when its messages are assembled here."""
        return self._topics.get(topic)

    def full(self) -> bool:
        """Whether ``MAX_REPUBLISHING`` messages still wait for acknowledgements (settled
        first): the step refuses intake then."""
        if len(self._entries) >= MAX_REPUBLISHING:
            self.settle()
        return len(self._entries) >= MAX_REPUBLISHING

    def republish(self, message: Envelope[RawMessage], topic: str, parts: dict[str, bytes]) -> None:
        """Send ``parts`` (by trace id) of ``message`` to ``topic``; done once all are acked."""
        if not parts:  # no spans: nothing to hand on
            self._done.submit(message)
            return
        entry = _Republish(message, topic, parts)
        self._entries.append(entry)
        self._send(entry)

    def _send(self, entry: _Republish) -> None:
        """Send the parts of ``entry`` not sent yet or failed; stop at the first that cannot
        be queued (tried again after ``REPUBLISH_RETRY_S``)."""
        republisher = self._republisher
        if republisher is None:  # never: only topics with a producer are re-published
            return
        for trace_id, value in entry.parts.items():
            ack = entry.acks.get(trace_id)
            if ack is not None and (not ack.done or ack.succeeded):
                continue
            if ack is not None:
                self._metrics.record_repartition("failed")
                log.warning("re-publishing spans failed; will retry", error=ack.error)
            try:
                entry.acks[trace_id] = republisher.send(
                    entry.topic, trace_id.encode("ascii"), value
                )
            except TransportError as err:
                entry.acks[trace_id] = None
                self._metrics.record_repartition("failed")
                log.warning("re-publishing spans failed; will retry", error=str(err))
                self._retry_at = self._clock.monotonic() + REPUBLISH_RETRY_S
                return

    def check_topics(self) -> None:
        """Once: each repartition topic exists with at least its source topic's partitions
        (fewer, and fewer replicas share the assembly; missing, and sends fail or the broker
        creates it with its own default)."""
        if self._topics_checked or self._partitions is None:
            return
        self._topics_checked = True
        for source, internal in sorted(self._topics.items()):
            want = self._partitions.partition_count(source)
            have = self._partitions.partition_count(internal)
            if have is None or (want is not None and have < want):
                log.warning(
                    "repartition topic missing or smaller than its source",
                    topic=internal,
                    partitions=have,
                    source=source,
                    source_partitions=want,
                    fix=f"create {internal} with as many partitions as {source}",
                )

    def settle(self) -> None:
        """Mark done the source messages whose parts are all acknowledged; retry failures."""
        if not self._entries:
            return
        retry = self._clock.monotonic() >= self._retry_at
        waiting: list[_Republish] = []
        for entry in self._entries:
            if entry.acknowledged:
                self._metrics.record_repartition("sent", len(entry.parts))
                self._done.submit(entry.message)
                continue
            waiting.append(entry)
            failed = any(a is None or (a.done and not a.succeeded) for a in entry.acks.values())
            if retry and (failed or len(entry.acks) < len(entry.parts)):
                self._send(entry)
                retry = self._clock.monotonic() >= self._retry_at
        self._entries = waiting

    def flush(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for the acknowledgements, then settle."""
        if self._entries and self._republisher is not None:
            try:
                self._republisher.flush(timeout_s)
            except TransportError as err:
                log.warning("re-published spans not acknowledged", error=str(err))
            self.settle()

    def close(self) -> None:
        try:
            if self._republisher is not None:
                self._republisher.close()
        except TransportError as err:
            log.warning("closing the repartition producer failed", error=str(err))

    def partitions(self) -> set[TopicPartition]:
        """The partitions of the messages still waiting for acknowledgements."""
        return {entry.message.tp for entry in self._entries}

    def discard(self, gone: Collection[TopicPartition]) -> None:
        """Forget the messages of partitions no longer ours. Their parts may still be
        acknowledged: the next owner re-publishes them (duplicates the assembler absorbs), the
        offset is not ours to commit."""
        self._entries = [e for e in self._entries if e.message.tp not in gone]
