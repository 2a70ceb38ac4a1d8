"""A replica SIGKILLed in the middle of a case run, on SQLite and PostgreSQL: what it stored
stays stored once, the cases it had not stored are judged by the next run (the lease taken
over once it lapsed), and no (assistant, conversation, version) has two verdicts."""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from monitor.jobs.build import build_jobs
from monitor.jobs.inputs import read_job_inputs
from monitor.jobs.scheduler import JobScheduler
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.runtime.processes import spawn_logged
from monitor.storage import case_queries
from monitor.storage.store import Store
from tests.fake_judge_server import FakeJudgeServer, Reply, content
from tests.support.case_worker import case_settings
from tests.support.cases import case_reply_text, store_turn, turn
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[3]
CONVERSATIONS = [f"conv-k{i:02d}" for i in range(8)]


def test_a_replica_killed_mid_run_loses_no_case_and_writes_none_twice(
    store: Store, tmp_path: Path
) -> None:
    # Stored an hour ago by the clock the worker reads: every case is quiet already.
    past = Store(store.url, clock=ManualClock(start=time.time() - 3600))
    for conversation in CONVERSATIONS:
        for i in range(2):
            store_turn(past, turn(conversation, i))
    past.close()
    release = threading.Event()
    answered: list[int] = []

    def responder(request: dict[str, Any]) -> Reply:
        if len(answered) >= 3:  # three cases judged, the fourth call hangs: the kill lands
            release.wait(60)
        answered.append(1)
        return content(case_reply_text())

    log = tmp_path / "worker.log"
    with FakeJudgeServer() as server, log.open("wb") as out:
        server.responder = responder
        worker = spawn_logged(
            [sys.executable, "-m", "tests.support.case_worker", store.url, server.base_url, "w1"],
            out,
            cwd=ROOT,
        )
        try:
            wait_for(lambda: len(server.requests) >= 4, timeout=120, what="the 4th case call")
            wait_for(lambda: _stored(store) == 3, timeout=60, what="three verdicts stored by w1")
            worker.send_signal(signal.SIGKILL)
            worker.wait(30)
        finally:
            release.set()
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        assert worker.returncode == -signal.SIGKILL, log.read_text()

        # The next replica: its clock past the dead one's lease, which it takes over.
        settings = case_settings(store.url, server.base_url)
        clock = ManualClock(start=time.time() + 600)
        metrics = Metrics(CollectorRegistry())
        scheduler = JobScheduler(store, metrics, owner="w2", clock=clock)
        for job in build_jobs(
            settings, store, metrics, clock, inputs=read_job_inputs(settings), lease_owner="w2"
        ):
            scheduler.add(job)
        try:
            assert scheduler.run_once("cases") == "ok"
        finally:
            scheduler.shutdown(timeout_s=10)
    for conversation in CONVERSATIONS:
        history = case_queries.case_history(store, conversation)
        assert [(r["version"], r["status"]) for r in history] == [(1, "ok")], conversation
    # The call in flight at the kill was paid and lost; the case was judged again, stored once.
    assert len(server.requests) == len(CONVERSATIONS) + 1


def _stored(store: Store) -> int:
    return sum(len(case_queries.case_history(store, c)) for c in CONVERSATIONS)
