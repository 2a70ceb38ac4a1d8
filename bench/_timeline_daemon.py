"""``casewatch`` with a startup timeline, for ``bench/chaos.py`` (not a product entry).

Writes one JSON line per milestone to stderr, beside the daemon's own structured log lines
(same stream, same ``timestamp`` field, plus ``t``: seconds since the epoch): the interpreter
up (before any casewatch import), casewatch imported, and kafka-python's group-protocol steps,
taken from its stdlib log records (casewatch does not route those: its own log is structlog):
coordinator lookup, JoinGroup and SyncGroup sent and answered, committed offsets fetched, the
first fetch. The bench pairs them with the daemon's own startup lines into phases.
"""

from __future__ import annotations

import time

T0 = time.time()  # before anything else is imported

import json  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# kafka-python's message templates (record.msg, unformatted) -> milestone.
MILESTONES: dict[str, str] = {
    "Sending group coordinator request": "kafka.coordinator_request",
    "Discovered coordinator": "kafka.coordinator_found",
    "(Re-)joining group": "kafka.join_start",
    "Sending JoinGroup": "kafka.join_sent",
    "Received JoinGroup response": "kafka.join_received",
    "Received member id": "kafka.join_member_id_required",
    "Sending leader SyncGroup": "kafka.sync_sent",
    "Sending follower SyncGroup": "kafka.sync_sent",
    "Received SyncGroup response": "kafka.sync_received",
    "Setting newly assigned partitions": "kafka.assigned",
    "Group %s fetching committed offsets": "kafka.offset_fetch_sent",
    "Received OffsetFetchResponse": "kafka.offset_fetch_received",
    "Sending FetchRequest": "kafka.fetch_sent",
    "Returning fetched records": "kafka.records_returned",
    "Attempt to join group": "kafka.join_failed",
    "SyncGroup for group": "kafka.sync_failed",
}
ONCE = {"kafka.fetch_sent", "kafka.records_returned"}  # per process: only the first
SAMPLE_EVERY_S = 0.5  # after the first fetched records: where the main thread is
SAMPLE_FOR_S = 60.0


def emit(event: str, at: float | None = None, **fields: object) -> None:
    at = time.time() if at is None else at
    stamp = datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")
    line = {"event": event, "timeline": True, "t": at, "timestamp": stamp, **fields}
    sys.stderr.write(json.dumps(line, default=str) + "\n")
    sys.stderr.flush()


class _Milestones(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self._seen: set[str] = set()
        self._fetches = 0
        self._returned: dict[object, int] = {}  # partition -> offset of its last fetch answer

    def _nonempty(self, record: logging.LogRecord) -> None:
        """A fetch answer may hold no records ("Returning fetched records" is logged either
        way): the first one that moved a position is the first with records."""
        template = str(record.msg)
        args: tuple[Any, ...] = record.args if isinstance(record.args, tuple) else ()
        if template.startswith("Sending FetchRequest"):
            self._fetches += 1
        elif template.startswith("Returning fetched records") and len(args) == 2:
            offset, tp = args
            self._returned[tp] = int(offset)
        elif template.startswith("Updating fetch position") and len(args) >= 2:
            tp, position = args[0], args[1]
            before = self._returned.get(tp)
            if before is not None and int(position) > before:
                self._seen.add("kafka.records_nonempty")
                emit("kafka.records_nonempty", record.created, fetches=self._fetches)

    def emit(self, record: logging.LogRecord) -> None:
        if "kafka.records_nonempty" not in self._seen:
            self._nonempty(record)
        template = str(record.msg)
        for prefix, name in MILESTONES.items():
            if template.startswith(prefix):
                if name in ONCE:
                    if name in self._seen:
                        return
                    self._seen.add(name)
                emit(name, record.created, detail=record.getMessage()[:200])
                if name == "kafka.records_returned":
                    threading.Thread(target=_sample_main, daemon=True).start()
                return


def _sample_main() -> None:
    """Where the main thread (the daemon's loop) spends the time after the first records
    came back: its innermost frame and casewatch frames, emitted when they change."""
    main = threading.main_thread().ident
    last: list[str] = []
    end = time.monotonic() + SAMPLE_FOR_S
    while time.monotonic() < end:
        frame = sys._current_frames().get(main or -1)
        where: list[str] = []
        innermost = True
        while frame is not None and len(where) < 8:
            code = frame.f_code
            ours = "/monitor/" in code.co_filename or "/consumers/" in code.co_filename
            if ours or innermost:
                where.append(f"{Path(code.co_filename).name}:{frame.f_lineno}:{code.co_name}")
            innermost = False
            frame = frame.f_back
        if where != last:
            emit("main_thread_sample", stack=where)
            last = where
        time.sleep(SAMPLE_EVERY_S)


def main() -> int:
    emit("interpreter_up", T0)
    kafka_log = logging.getLogger("kafka")
    kafka_log.setLevel(logging.DEBUG)
    kafka_log.addHandler(_Milestones())
    kafka_log.propagate = False  # warnings still matter: keep them on stderr
    warnings = logging.StreamHandler(sys.stderr)
    warnings.setLevel(logging.WARNING)
    kafka_log.addHandler(warnings)
    from monitor.cli import main as cli

    emit("cli_imported")
    sys.argv[0] = "casewatch"
    result: int = cli()
    return result


if __name__ == "__main__":
    raise SystemExit(main())
