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
from datetime import UTC, datetime  # noqa: E402
from pathlib import Path  # noqa: E402

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

    def emit(self, record: logging.LogRecord) -> None:
        template = str(record.msg)
        for prefix, name in MILESTONES.items():
            if template.startswith(prefix):
                if name in ONCE:
                    if name in self._seen:
                        return
                    self._seen.add(name)
                emit(name, record.created, detail=record.getMessage()[:200])
                return


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
