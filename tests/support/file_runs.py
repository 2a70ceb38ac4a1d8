"""What a `casewatch run --file` finished with, in-process: the counters it exported, the
verdicts it stored and the reasons of its dead letters (for tests that compare two runs)."""

from __future__ import annotations

import json
from pathlib import Path

import sqlalchemy as sa
from prometheus_client import CollectorRegistry

from monitor.config.settings import Settings
from monitor.storage.store import Store
from monitor.storage.tables import verdicts
from monitor.stream.file_state import file_sidecars
from monitor.stream.runner import DaemonRunner


def outcome_of_a_file_run(settings: Settings, data: Path, copy: Path) -> dict[str, object]:
    """Runs the daemon on a copy of ``data`` (its own offsets and dead-letter sidecars) until
    the file is worked through, into ``settings.storage.url``."""
    url = settings.storage.url
    registry = CollectorRegistry()
    copy.write_bytes(data.read_bytes())
    DaemonRunner(settings, registry, file_path=copy).run_foreground(install_signals=False)
    counters = {
        (family.name, tuple(sorted(s.labels.items()))): s.value
        for family in registry.collect()
        if family.name.startswith(("casewatch_turns_", "casewatch_dead_letter", "casewatch_trip"))
        and family.type == "counter"
        for s in family.samples
        if s.name.endswith("_total")
    }
    store = Store(url)
    try:
        with store.transaction(write=False) as conn:
            stored = sorted(conn.execute(sa.select(verdicts.c.event_id)).scalars())
    finally:
        store.close()
    dlq_path, _ = file_sidecars(copy, url)
    dead = sorted(json.loads(line)["reason"] for line in dlq_path.read_text().splitlines())
    return {"counters": counters, "stored": stored, "dead": dead}
