"""The issue-21 scenario end to end: 60 turns of which 3 the database refuses, through the real
daemon (file source, real judge, real store) on SQLite and PostgreSQL. Before the fix nothing
was stored and the stream stalled; now 57 are stored, 3 dead-lettered, every offset committed."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from prometheus_client import CollectorRegistry

from consumers.dlq import FileDeadLetterSink
from consumers.file_source import FileTurnSource
from monitor.config.settings import load_settings
from monitor.judging.evaluator import build_evaluator
from monitor.metrics.exporter import Metrics
from monitor.storage.audit import counts
from monitor.storage.store import Store
from tests.fixtures.databases import make_turn
from tests.support.daemon import build_daemon, close_opened

# One refused kind per backend that survives the trip through JSON: PostgreSQL cannot hold a
# NUL ("\u0000" in the JSON) in JSONB; SQLite cannot hold an integer beyond 64 bits.
BAD = {"postgresql": {"query": "pasted\x00binary"}, "sqlite": {"turn_index": 2**70}}


def test_unstorable_turns_are_dead_lettered_and_the_stream_moves_on(
    db_url: str, tmp_path: Path
) -> None:
    store = Store(db_url)
    store.migrate()
    bad_at = {7, 31, 58}
    lines = [
        make_turn(f"evt-{i}", **(BAD[store.dialect] if i in bad_at else {})).model_dump_json()
        for i in range(60)
    ]
    data = tmp_path / "turns.jsonl"
    data.write_text("\n".join(lines) + "\n")
    settings = load_settings(None, storage={"url": db_url})
    source = FileTurnSource(data, offsets_path=tmp_path / "offsets.json")
    dlq_path = tmp_path / "dlq.jsonl"
    registry = CollectorRegistry()
    dlq, evaluator = (
        FileDeadLetterSink(dlq_path),
        build_evaluator(settings, concurrency=settings.daemon.concurrency),
    )
    daemon = build_daemon(
        settings, source, dlq, store, evaluator, Metrics(registry), exit_when_idle=True
    )
    thread = threading.Thread(target=daemon.run, daemon=True)
    thread.start()
    try:
        assert daemon.wait_finished(timeout=120), "the stream stalled"
    finally:
        thread.join(timeout=10)
        daemon.close()
        close_opened(source, dlq, evaluator)
    assert counts(store)["verdicts"] == 57
    assert source.committed == 60  # committed past the refused turns
    dead = [json.loads(line) for line in dlq_path.read_text().splitlines()]
    assert sorted(d["offset"] for d in dead) == sorted(bad_at)
    assert all(d["reason"] == "unstorable" for d in dead)
    assert all(f"'evt-{d['offset']}'" in d["detail"] for d in dead)
    unstorable = {"reason": "unstorable"}
    assert registry.get_sample_value("casewatch_dead_letter_total", unstorable) == 3
    store.close()
