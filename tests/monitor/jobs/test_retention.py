"""The retention job deletes what was stored more than retention_days ago, nothing newer."""

from __future__ import annotations

import time
from pathlib import Path

from monitor.clock import ManualClock
from monitor.jobs.retention import RetentionJob
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
    assert store.counts()["verdicts"] == 0
    store.close()
