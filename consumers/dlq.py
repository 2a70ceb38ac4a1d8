"""Dead-letter sinks: where poison records go, with the reason they could not be processed.

The pipeline commits past a dead-lettered record only once the sink has it durably, so both
sinks make ``send`` durable before returning (``flush`` then has nothing left to wait for and
is kept for the protocol). A sink that cannot write raises ``TransportError``: the pipeline treats
that as backpressure and offers the record again later.
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
from consumers.records import RawMessage
from monitor.config.kafka import KafkaConfig
from monitor.errors import TurnFileError, truncate

HEADER_REASON = "casewatch-dlq-reason"
HEADER_DETAIL = "casewatch-dlq-detail"
HEADER_TOPIC = "casewatch-original-topic"
HEADER_PARTITION = "casewatch-original-partition"
HEADER_OFFSET = "casewatch-original-offset"
HEADER_TRUNCATED = "casewatch-dlq-truncated"
_OURS = (HEADER_REASON, HEADER_DETAIL, HEADER_TOPIC, HEADER_PARTITION, HEADER_OFFSET)

# A detail is a diagnostic, not a payload; the record itself carries the evidence.
MAX_DETAIL_CHARS = 500


class DeadLetterSink(Protocol):
    def send(self, msg: RawMessage, reason: str, detail: str) -> None:
        """Store ``msg`` with why it failed; durable on return. Raises ``TransportError``."""
        ...

    def flush(self, timeout_s: float) -> None:
        """Wait until everything sent is durable. Raises ``TransportError``."""
        ...

    def close(self) -> None:
        """Release the sink within a bounded time, also when its broker is unreachable."""
        ...


def _detail(detail: str) -> str:
    return truncate(detail, MAX_DETAIL_CHARS)


class KafkaDeadLetterQueue:
    """Produces poison records to ``<original topic><dlq_suffix>`` (acks=all).

    The value and key are the original bytes, so the record can be fixed and replayed as is;
    values larger than ``max_message_bytes`` are cut to that size and marked truncated.
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
        self._timeout_s = send_timeout_s
        self._close_timeout_s = close_timeout_s
        self._closed = False
        self._producer = open_producer(
            "the dead-letter producer",
            self._servers,
            config,
            connect_timeout_s=connect_timeout_s,
            acks="all",
            # A missing DLQ topic must surface as an error, not block the pipeline for 60 s.
            max_block_ms=int(send_timeout_s * 1000),
            bootstrap_timeout_ms=int(connect_timeout_s * 1000),
        )

    def topic_for(self, topic: str) -> str:
        return f"{topic}{self._suffix}"

    def send(self, msg: RawMessage, reason: str, detail: str) -> None:
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
        with broker_errors("writing to the dead-letter topic", self._servers):
            future = self._producer.send(
                self.topic_for(msg.topic), value=value, key=msg.key, headers=headers
            )
            # Waiting per record keeps the guarantee simple; poison records are rare.
            future.get(timeout=self._timeout_s)

    def flush(self, timeout_s: float) -> None:
        with broker_errors("flushing the dead-letter topic", self._servers):
            self._producer.flush(timeout=timeout_s)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Every send was awaited, so only a send that timed out can still be pending: it was
        # reported then (its record stays uncommitted) and is dropped here.
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

    def send(self, msg: RawMessage, reason: str, detail: str) -> None:
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
