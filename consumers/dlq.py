"""Dead-letter sinks: where poison records go, with the reason they could not be processed.

The pipeline commits past a dead-lettered record only once the sink has it durably. ``send``
hands the record over and returns its ``Delivery``; the sender keeps it and asks it, without
waiting, whether the record is written yet (``DecodeStep`` finishes the record then, and sends
it again when the write failed). The Kafka sink writes in the background, so a burst of
poison is many records in flight together, not one broker round trip per record on the
consumer's thread; the file sink writes before returning. ``flush`` waits for everything sent
so far and raises ``TransportError`` when any of it failed, for senders that need a record
durable at once (a turn the database refuses). A sink that cannot take a record at all raises
``TransportError`` from ``send``: the pipeline treats that as backpressure and offers the
record again later.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import threading
from pathlib import Path
from typing import IO, Any, Protocol

from consumers._kafka import broker_errors, close_producer
from consumers.producer import open_producer
from consumers.records import WRITTEN, Delivery, RawMessage
from monitor.config.kafka import KafkaConfig
from monitor.errors import BrokerError, TurnFileError, truncate

HEADER_REASON = "casewatch-dlq-reason"
HEADER_DETAIL = "casewatch-dlq-detail"
HEADER_TOPIC = "casewatch-original-topic"
HEADER_PARTITION = "casewatch-original-partition"
HEADER_OFFSET = "casewatch-original-offset"
HEADER_TRUNCATED = "casewatch-dlq-truncated"
_OURS = (HEADER_REASON, HEADER_DETAIL, HEADER_TOPIC, HEADER_PARTITION, HEADER_OFFSET)

# A detail is a diagnostic, not a payload; the record itself carries the evidence.
MAX_DETAIL_CHARS = 500
# Deliveries the Kafka sink remembers for its next flush before it forgets the acknowledged.
_PRUNE_AT = 1024


class DeadLetterSink(Protocol):
    def send(self, msg: RawMessage, reason: str, detail: str) -> Delivery:
        """Hand ``msg`` over with why it failed, without waiting for the write; the delivery
        says when it is durable. Raises ``TransportError`` when the sink cannot take it."""
        ...

    def flush(self, timeout_s: float) -> None:
        """Wait until everything sent is written. Raises ``TransportError`` when that takes
        longer than ``timeout_s`` or a record sent since the last flush was not written."""
        ...

    def close(self) -> None:
        """Release the sink within a bounded time, also when its broker is unreachable."""
        ...


def _detail(detail: str) -> str:
    return truncate(detail, MAX_DETAIL_CHARS)


class _KafkaDelivery:
    """One dead letter in the producer's hands (kafka-python's future, read without waiting)."""

    __slots__ = ("_future", "_servers")

    def __init__(self, future: Any, servers: list[str]) -> None:
        self._future = future
        self._servers = servers

    @property
    def failed(self) -> bool:
        return bool(self._future.failed())

    @property
    def written(self) -> bool:
        return bool(self._future.succeeded())

    def acknowledged(self) -> bool:
        future = self._future
        if not future.is_done:
            return False
        if future.exception is not None:
            with broker_errors("writing to the dead-letter topic", self._servers):
                raise future.exception
        return True


class KafkaDeadLetterQueue:
    """Produces poison records to ``<original topic><dlq_suffix>`` (acks=all).

    The value and key are the original bytes, so the record can be fixed and replayed as is;
    values larger than ``max_message_bytes`` are cut to that size and marked truncated.
    A record the cluster has not acknowledged within ``send_timeout_s`` (plus a second) fails
    its delivery, so the sender sends it again rather than waiting on the producer's two
    minutes.
    """

    def __init__(
        self,
        config: KafkaConfig,
        *,
        send_timeout_s: float = 30.0,
        connect_timeout_s: float = 30.0,
        close_timeout_s: float = 5.0,
    ) -> None:
        self._servers = list(config.bootstrap_servers)
        self._suffix = config.dlq_suffix
        self._max_value = config.max_message_bytes
        self._close_timeout_s = close_timeout_s
        self._closed = False
        self._lock = threading.Lock()
        self._sent: list[_KafkaDelivery] = []  # since the last flush, for it to check
        self._prune_at = _PRUNE_AT
        send_ms = int(send_timeout_s * 1000)
        self._producer = open_producer(
            "the dead-letter producer",
            self._servers,
            config,
            connect_timeout_s=connect_timeout_s,
            acks="all",
            # A missing DLQ topic must surface as an error, not block the pipeline for 60 s.
            max_block_ms=send_ms,
            request_timeout_ms=send_ms,
            # The producer's floor for it: linger (0) + one request.
            delivery_timeout_ms=send_ms + 1000,
            bootstrap_timeout_ms=int(connect_timeout_s * 1000),
        )

    def topic_for(self, topic: str) -> str:
        return f"{topic}{self._suffix}"

    def send(self, msg: RawMessage, reason: str, detail: str) -> Delivery:
        value = msg.value
        headers: list[tuple[str, bytes]] = [(k, v) for k, v in msg.headers if k not in _OURS]
        headers += [
            (HEADER_REASON, reason.encode()),
            (HEADER_DETAIL, _detail(detail).encode("utf-8", "replace")),
            (HEADER_TOPIC, msg.topic.encode()),
            (HEADER_PARTITION, str(msg.partition).encode()),
            (HEADER_OFFSET, str(msg.offset).encode()),
        ]
        if value is not None and len(value) > self._max_value:
            value = value[: self._max_value]
            headers.append((HEADER_TRUNCATED, b"true"))
        # Waits only for what the producer cannot do without the broker: the topic's metadata
        # (once per topic) or room in its buffer; the write itself goes on in its thread.
        with broker_errors("writing to the dead-letter topic", self._servers):
            future = self._producer.send(
                self.topic_for(msg.topic), value=value, key=msg.key, headers=headers
            )
        delivery = _KafkaDelivery(future, self._servers)
        with self._lock:
            self._sent.append(delivery)
            if len(self._sent) >= self._prune_at:
                # A sender that does not flush asks its own deliveries; what is written is
                # forgotten here, then what failed, and the list stays bounded by what is in
                # flight (the producer's buffer).
                self._sent = [d for d in self._sent if not d.written]
                if len(self._sent) >= _PRUNE_AT:
                    self._sent = [d for d in self._sent if not d.failed]
                self._prune_at = max(_PRUNE_AT, 2 * len(self._sent))
        return delivery

    def flush(self, timeout_s: float) -> None:
        with self._lock:
            sent, self._sent = self._sent, []
        try:
            with broker_errors("flushing the dead-letter topic", self._servers):
                self._producer.flush(timeout=timeout_s)
        except BrokerError:
            with self._lock:  # not settled yet: the next flush checks them again
                self._sent[:0] = [d for d in sent if not d.written]
            raise
        failed = [d for d in sent if d.failed]
        if failed:
            try:
                failed[0].acknowledged()
            except BrokerError as exc:
                raise BrokerError(f"{len(failed)} dead letter(s) not written: {exc}") from exc

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Records still in flight are dropped: their offsets were never committed (the sender
        # finishes a record only once its delivery is acknowledged), so they are read again.
        with broker_errors("closing the dead-letter producer", self._servers):
            close_producer(self._producer, self._close_timeout_s)


class FileDeadLetterSink:
    """Appends one JSON object per poison record to a JSONL file (for the file source).

    ``value`` is the original text when it is valid UTF-8 (``value_encoding: "utf-8"``), else
    base64 (``"base64"``), so nothing is lost either way.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file: IO[str] | None = path.open("a", encoding="utf-8")
        except OSError as exc:
            raise TurnFileError(f"cannot open dead-letter file {path}: {exc}") from exc

    @property
    def path(self) -> Path:
        return self._path

    def send(self, msg: RawMessage, reason: str, detail: str) -> Delivery:
        record: dict[str, Any] = {
            "topic": msg.topic,
            "partition": msg.partition,
            "offset": msg.offset,
            "reason": reason,
            "detail": _detail(detail),
        }
        record.update(_encoded("value", msg.value))
        if msg.key is not None:
            record.update(_encoded("key", msg.key))
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock:
            if self._file is None:
                raise TurnFileError(f"dead-letter file {self._path} is closed")
            try:
                self._file.write(line)
                self._file.flush()
                os.fsync(self._file.fileno())
            except OSError as exc:
                raise TurnFileError(f"cannot write dead-letter file {self._path}: {exc}") from exc
        return WRITTEN  # fsynced above

    def flush(self, timeout_s: float) -> None:
        return None  # send() already fsynced

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def _encoded(name: str, data: bytes | None) -> dict[str, Any]:
    if data is None:
        return {name: None}
    try:
        return {name: data.decode("utf-8"), f"{name}_encoding": "utf-8"}
    except UnicodeDecodeError:
        return {name: base64.b64encode(data).decode("ascii"), f"{name}_encoding": "base64"}


def decode_file_value(record: dict[str, Any], name: str = "value") -> bytes | None:
    """The original bytes of a FileDeadLetterSink record (for replay tools and tests)."""
    data = record.get(name)
    if data is None:
        return None
    if record.get(f"{name}_encoding") == "base64":
        try:
            return base64.b64decode(data, validate=True)
        except binascii.Error as exc:
            raise ValueError(f"dead-letter record has bad base64 in {name!r}") from exc
    return str(data).encode("utf-8")
