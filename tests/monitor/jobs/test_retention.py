"""The retention job deletes what was stored more than retention_days ago, nothing newer."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from monitor.jobs.retention import RetentionJob
from monitor.runtime.clock import ManualClock
from monitor.storage.audit import counts
from monitor.storage.matches import insert_matches, run_matches
from monitor.storage.store import Store
from tests.fixtures.databases import make_turn, make_verdict


def test_retention_job_purges_old_rows(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.migrate()
    turn = make_turn("old")
    store.save(turn, make_verdict(turn))
    clock = ManualClock(start=time.time())
    job = RetentionJob(store, retention_days=1, clock=clock)
    job.run()
    assert job.last_deleted == 0
    clock.advance(2 * 86_400)
    job.run()
    assert job.last_deleted == 1
    assert counts(store)["verdicts"] == 0
    store.close()


def _match(run_id: str, created_at: datetime) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "assistant": "helpdesk",
        "opponent": "high",
        "probe_id": "p1",
        "source": "endpoint",
        "answer": "an answer",
        "judge": "pairwise",
        "model": "m",
        "prompt_version": "v1",
        "status": "ok",
        "forward": {},
        "cost_usd": 0.0,
        "created_at": created_at,
    }


def test_retention_purges_pairwise_matches_like_the_other_tables(store: Store) -> None:
    clock = ManualClock(start=time.time())
    now = datetime.fromtimestamp(clock.time(), tz=UTC)
    insert_matches(store, [_match("old", now - timedelta(days=3)), _match("new", now)])
    RetentionJob(store, retention_days=1, clock=clock).run()
    assert run_matches(store, "old") == []
    assert len(run_matches(store, "new")) == 1
