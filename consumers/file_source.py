"""TurnSource over a JSONL file or stdin: one turn event per line.

Messages look like a single-partition topic ``file``/0 whose offset is the line number
(from 0), so the pipeline, offset tracking and dead-lettering work unchanged. Blank lines
keep their number but are not delivered. ``commit`` writes the next line number to
``offsets_path`` (write to a temp file, fsync, rename: never a torn file) and a restart skips
that many lines. ``follow`` keeps reading lines appended to the file (like ``tail -f``); a
line counts only once its newline is written, so a half-written line is never parsed.
Rotation and truncation are not detected: follow one growing file.

With ``base64_lines`` each line is one binary message in base64 (``otlp_proto``: a serialized
``ExportTraceServiceRequest`` a line, ``base64 -w0`` of each, since protobuf bytes contain
newlines); the decoded bytes are delivered, as a Kafka record would carry them. A line that is
not base64 is delivered as it is, for the decoder to reject with its reason (a JSON line is then
named as JSON).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import select
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from consumers.records import RawMessage, TopicPartition
from consumers.source import PartitionsCallback
from monitor.errors import ConfigError, TurnFileError

FILE_TOPIC = "file"
FILE_TP = TopicPartition(FILE_TOPIC, 0)
_CHUNK = 1 << 20
# How often a follower looks for appended data while waiting.
FOLLOW_INTERVAL_S = 0.05


class FileTurnSource:
    def __init__(
        self,
        path: Path | None,
        follow: bool = False,
        offsets_path: Path | None = None,
        *,
        base64_lines: bool = False,
    ) -> None:
        self._path = path
        self._base64_lines = base64_lines
        self._follow = follow and path is not None
        self._offsets_path = offsets_path
        self._on_assigned: PartitionsCallback | None = None
        self._on_revoked: PartitionsCallback | None = None
        self._announced = False
        self._paused = False
        self._eof = False
        self._buffer = b""
        self._next_line = 0  # number of the next line to come out of the buffer
        self._committed = self._load_committed()
        self._owns_fd = path is not None
        if path is None:
            self._fd = sys.stdin.buffer.fileno()
        else:
            try:
                self._fd = os.open(path, os.O_RDONLY)
            except OSError as exc:
                raise ConfigError(f"cannot read input file {path}: {exc.strerror}") from exc
        self._closed = False

    def line_count(self) -> int:
        """Complete lines in the file now (0 for stdin, which cannot be read ahead)."""
        if self._path is None:
            return 0
        try:
            with self._path.open("rb") as fh:
                return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(_CHUNK), b""))
        except OSError as exc:
            raise TurnFileError(f"cannot read input file {self._path}: {exc.strerror}") from exc

    @property
    def committed(self) -> int:
        """The next line to read after a restart (the last committed offset)."""
        return self._committed

    def resume_note(self) -> str | None:
        """What a restart resumes from, said loudly: a file read to its end before reads
        nothing this time, which must not look like a file with nothing in it. None when
        reading starts at the first line."""
        if self._committed == 0 or self._path is None or self._offsets_path is None:
            return None
        total = self.line_count()
        news = "nothing new" if self._committed >= total else f"{total - self._committed} new"
        return (
            f"resuming at line {self._committed} of {total} from {self._path}; {news}; "
            f"delete {self._offsets_path} to start over"
        )

    @property
    def exhausted(self) -> bool:
        """True once a non-following source has delivered its last line."""
        return self._eof and not self._follow and not self._buffer

    # ------------------------------------------------------------------ TurnSource

    def poll(
        self, timeout_s: float, max_records: int, *, join_limit_s: float | None = None
    ) -> list[RawMessage]:
        # ``join_limit_s``: a file has no group to join.
        if self._closed:
            raise TurnFileError("the file source is closed")
        if not self._announced:
            self._announced = True
            if self._on_assigned is not None:
                self._on_assigned({FILE_TP})
        if self._paused:
            time.sleep(max(0.0, min(timeout_s, FOLLOW_INTERVAL_S)))
            return []
        deadline = time.monotonic() + max(0.0, timeout_s)
        out: list[RawMessage] = []
        while len(out) < max_records:
            line = self._next_raw_line(deadline if not out else None)
            if line is None:
                break
            number, data = line
            if number < self._committed or not data.strip():
                continue  # already committed before a restart, or blank
            if self._base64_lines:
                data = _from_base64(data)
            out.append(RawMessage(FILE_TOPIC, 0, number, data))
        return out

    def commit(self, offsets: Mapping[TopicPartition, int], timeout_s: float | None = None) -> None:
        # A local file write: nothing to time out.
        offset = offsets.get(FILE_TP)
        if offset is None or offset <= self._committed:
            return
        if self._offsets_path is not None:
            self._write_offset(self._offsets_path, offset)
        self._committed = offset

    def pause(self, tps: Iterable[TopicPartition]) -> None:
        if FILE_TP in set(tps):
            self._paused = True

    def resume(self, tps: Iterable[TopicPartition]) -> None:
        if FILE_TP in set(tps):
            self._paused = False

    def paused(self) -> set[TopicPartition]:
        return {FILE_TP} if self._paused else set()

    def assignment(self) -> set[TopicPartition]:
        return set() if self._closed else {FILE_TP}

    def lag(self) -> dict[TopicPartition, int]:
        return {}  # unknown without reading ahead; a file has no end offset to compare with

    def set_rebalance_listener(
        self, on_assigned: PartitionsCallback, on_revoked: PartitionsCallback
    ) -> None:
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked

    def ping(self) -> bool:
        return not self._closed

    def close(self) -> None:
        if self._closed:
            return
        try:
            if self._announced and self._on_revoked is not None:
                self._on_revoked({FILE_TP})
        finally:
            self._closed = True
            if self._owns_fd:
                os.close(self._fd)

    # ------------------------------------------------------------------ reading

    def _next_raw_line(self, deadline: float | None) -> tuple[int, bytes] | None:
        """The next complete line (number, bytes without the newline), or None when none is
        available by ``deadline`` (None: only what can be read without waiting)."""
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                data = self._buffer[:newline]
                self._buffer = self._buffer[newline + 1 :]
                return self._emit(data.removesuffix(b"\r"))
            if self._eof and not self._follow:
                if self._buffer:  # a last line without a trailing newline
                    data, self._buffer = self._buffer, b""
                    return self._emit(data.removesuffix(b"\r"))
                return None
            if not self._read_chunk(deadline):
                return None

    def _emit(self, data: bytes) -> tuple[int, bytes]:
        number = self._next_line
        self._next_line += 1
        return number, data

    def _read_chunk(self, deadline: float | None) -> bool:
        """Append available bytes to the buffer; False when nothing came before deadline."""
        while True:
            remaining = 0.0 if deadline is None else deadline - time.monotonic()
            if not self._owns_fd:
                # A pipe: wait for it to become readable instead of blocking in read().
                ready, _, _ = select.select([self._fd], [], [], max(0.0, remaining))
                if not ready:
                    return False
            try:
                chunk = os.read(self._fd, _CHUNK)
            except OSError as exc:
                raise TurnFileError(f"reading {self._describe()} failed: {exc}") from exc
            if chunk:
                self._buffer += chunk
                return True
            if not self._follow:
                self._eof = True
                return False
            if remaining <= 0:
                return False
            time.sleep(min(FOLLOW_INTERVAL_S, remaining))

    def _describe(self) -> str:
        return str(self._path) if self._path is not None else "stdin"

    # ------------------------------------------------------------------ offsets file

    def _load_committed(self) -> int:
        path = self._offsets_path
        if path is None or not path.exists():
            return 0
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            offset = doc["offset"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"offsets file {path} is unreadable ({exc}); delete it to start from line 0"
            ) from exc
        if not isinstance(offset, int) or offset < 0:
            raise ConfigError(f"offsets file {path}: 'offset' must be a non-negative integer")
        return offset

    def _write_offset(self, path: Path, offset: int) -> None:
        tmp = path.with_name(f".{path.name}.tmp")
        doc = {"source": self._describe(), "offset": offset}
        try:
            with tmp.open("w", encoding="utf-8") as fh:
                json.dump(doc, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            raise TurnFileError(f"cannot write offsets file {path}: {exc}") from exc


def _from_base64(line: bytes) -> bytes:
    try:
        return base64.b64decode(line.strip(), validate=True)
    except binascii.Error:
        return line
