"""Re-publishing OTLP spans keyed by trace id (``assembly.repartition``): the producer side.

The Collector's Kafka exporter does not key its messages by trace id unless told to, so one
trace's spans reach several partitions, and with two or more replicas in a group no replica
sees the whole trace. Kafka's own answer is a repartition topic (the Kafka Streams pattern):
each replica re-publishes what it reads to an internal topic keyed by trace id, which the same
group reads; the producer's partitioner sends every record of one key to one partition, so one
replica reads the whole trace. The assemble step splits each batch by trace
(``consumers.otel.otlp.split_by_trace``) and sends the parts here; it marks the source message
done only once every part is acknowledged (acks=all), so "committed" still means "handed on".

Sends do not wait: ``send`` returns an ``Ack`` the step looks at on its next poll, and ``flush``
waits for every send (bounded), for a join. A failed send is the step's to retry.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from consumers._kafka import broker_errors, close_producer
from consumers.producer import open_producer
from consumers.records import TopicPartition
from monitor.config.kafka import KafkaConfig


@runtime_checkable
class KnowsPartitions(Protocol):
    """A source that can say whether this member reads every partition of a topic (the Kafka
    source; a file is one partition and need not)."""

    def assignment(self) -> set[TopicPartition]: ...

    def partition_count(self, topic: str) -> int | None: ...


class Ack:
    """What became of one re-published record."""

    __slots__ = ("_future",)

    def __init__(self, future: Any) -> None:
        self._future = future

    @property
    def done(self) -> bool:
        return bool(self._future.is_done)

    @property
    def succeeded(self) -> bool:
        return bool(self._future.is_done and self._future.succeeded())

    @property
    def error(self) -> str | None:
        """Why it failed (None while pending or once acknowledged)."""
        if not self._future.is_done or self._future.succeeded():
            return None
        exc = self._future.exception
        return f"{type(exc).__name__}: {exc}"


class TraceRepublisher:
    """A producer of the internal repartition topics (acks=all, batched)."""

    def __init__(
        self,
        config: KafkaConfig,
        *,
        send_timeout_s: float = 30.0,
        connect_timeout_s: float = 30.0,
        close_timeout_s: float = 5.0,
    ) -> None:
        self._servers = list(config.bootstrap_servers)
        self._close_timeout_s = close_timeout_s
        self._closed = False
        self._producer = open_producer(
            "the repartition producer",
            self._servers,
            config,
            connect_timeout_s=connect_timeout_s,
            acks="all",
            # Parts of one batch go out together; the step waits for them on its next poll.
            linger_ms=5,
            # A part sent twice is one span to the assembler (or duplicate_span), so the
            # idempotent producer buys nothing here; and its sequence state wedges a send for
            # the whole delivery timeout (two minutes) against a broker that lost it.
            enable_idempotence=False,
            # A missing repartition topic must surface as an error the step retries, not
            # block the loop for the library's minute.
            max_block_ms=int(send_timeout_s * 1000),
            bootstrap_timeout_ms=int(connect_timeout_s * 1000),
        )

    def send(self, topic: str, key: bytes, value: bytes) -> Ack:
        """Queue one record; ``BrokerError`` when it cannot even be queued."""
        with broker_errors(f"re-publishing spans to {topic}", self._servers):
            return Ack(self._producer.send(topic, value=value, key=key))

    def flush(self, timeout_s: float) -> None:
        with broker_errors("flushing the repartition producer", self._servers):
            self._producer.flush(timeout=timeout_s)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Records not acknowledged by now are dropped: their source messages were not marked
        # done, so whoever reads those partitions next re-publishes them.
        with broker_errors("closing the repartition producer", self._servers):
            close_producer(self._producer, self._close_timeout_s)


__all__ = ["Ack", "KnowsPartitions", "TraceRepublisher"]
