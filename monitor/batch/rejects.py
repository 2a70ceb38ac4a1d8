"""The rejects file of ``casewatch judge``: the batch's dead-letter sink.

One JSON object per rejected line: its number (from 1), the reason and detail the pipeline
gave (the decode step's, or the redact step's for a turn too large to redact) and the start
of the line, enough to recognise it. It describes this run's input, so it starts empty each
run. The first rejections are also said on stderr, above the progress bar, in place of the
pipeline's log line for each (``DEAD_LETTER_EVENTS``, which ``casewatch judge`` does not log).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import IO

from tqdm import tqdm

from consumers.records import WRITTEN, Delivery, RawMessage

REJECT_RAW_CHARS = 500  # enough to recognise the line, not a copy of a huge record
STDERR_REJECTS = 20  # a wholly broken input should not flood the terminal
# The pipeline's log events for a record it dead-letters (monitor/stream/steps/base.py): the
# line send() writes says the same, counted from 1, so the batch does not log them too.
DEAD_LETTER_EVENTS: tuple[str, ...] = ("record dead-lettered", "turn dead-lettered")


class RejectsFile:
    """Implements ``consumers.dlq.DeadLetterSink`` for records of a file source (offset:
    the line's index from 0). Only the pipeline's loop thread sends."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.count = 0
        self._file: IO[str] = path.open("w", encoding="utf-8")

    def send(self, msg: RawMessage, reason: str, detail: str) -> Delivery:
        self.count += 1
        line = msg.offset + 1
        if self.count <= STDERR_REJECTS:
            said = f"line {line}: rejected ({reason}): {detail}"
            if self.count == STDERR_REJECTS:
                said += f"\n(further rejected lines are only listed in {self.path})"
            tqdm.write(said, file=sys.stderr)
        raw = (msg.value or b"").strip()[:REJECT_RAW_CHARS]
        record = {
            "line": line,
            "reason": reason,
            "detail": detail,
            "raw": raw.decode("utf-8", errors="replace"),
        }
        self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._file.flush()
        return WRITTEN

    def flush(self, timeout_s: float) -> None:
        return None  # every send is flushed

    def close(self) -> None:
        self._file.close()
