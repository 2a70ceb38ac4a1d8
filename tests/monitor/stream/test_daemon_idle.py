"""The daemon's loop sleeps while its turns wait on the judge: a file read to its end is not
polled again, and the loop turns only when something happens (records read, a judge call
finished), not once per empty poll."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import monitor.stream.daemon as daemon_module
from consumers.dlq import FileDeadLetterSink
from consumers.file_source import FileTurnSource
from monitor.config.settings import load_settings
from monitor.judging.evaluator import build_evaluator
from monitor.metrics.exporter import Metrics
from monitor.storage.store import Store
from monitor.stream.http import Heartbeat
from tests.fake_judge_server import FakeJudgeServer, Reply, scores
from tests.fixtures.judge_server import fake_judge_config
from tests.support.daemon import build_daemon, close_opened, rows_per_event, turn_values
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

TURNS = 3


class CountingHeartbeat(Heartbeat):
    """The daemon's own heartbeat, counting the loop's turns (each turn ticks it once, each
    poll of the source once more)."""

    def __init__(self) -> None:
        super().__init__(60.0)
        self.ticks = 0

    def tick(self) -> None:
        self.ticks += 1
        super().tick()


class CountingFileSource(FileTurnSource):
    """The file source, counting the polls that found nothing to read."""

    empty_polls = 0

    def poll(self, timeout_s: float, max_records: int, **kwargs: Any) -> Any:
        records = super().poll(timeout_s, max_records, **kwargs)
        if not records:
            self.empty_polls += 1
        return records


def test_the_loop_sleeps_while_every_turn_waits_on_the_judge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With the idle wait's bound out of reach, the loop can turn only on an event: the records
    # read, a judge call finishing. A loop that polls its exhausted file again and again turns
    # thousands of times while one judge call is answered.
    monkeypatch.setattr(daemon_module, "IDLE_WAIT_S", 3600.0)
    data = tmp_path / "turns.jsonl"
    data.write_bytes(b"\n".join(turn_values(TURNS)) + b"\n")
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    gate = threading.Semaphore(0)

    def held(_request: dict[str, Any]) -> Reply:
        gate.acquire()  # on the server's handler thread: the call waits until the test lets it
        return scores(0.9)

    with FakeJudgeServer(responder=held) as judge:
        judge_cfg = fake_judge_config(judge, timeout_seconds=600, transport_retries=0)
        settings = load_settings(
            None, storage={"url": url}, judges={"remote": judge_cfg}, judge="remote"
        )
        store = Store(url)
        store.migrate()
        source = CountingFileSource(data)
        dlq = FileDeadLetterSink(tmp_path / "dlq.jsonl")
        evaluator = build_evaluator(settings, concurrency=settings.daemon.concurrency)
        registry = CollectorRegistry()
        heartbeat = CountingHeartbeat()
        daemon = build_daemon(
            settings,
            source,
            dlq,
            store,
            evaluator,
            Metrics(registry),
            heartbeat=heartbeat,
            exit_when_idle=True,
        )
        thread = threading.Thread(target=daemon.run, name="daemon", daemon=True)
        thread.start()

        def judged() -> float:
            labels = {"judge": "remote", "outcome": "ok"}
            return registry.get_sample_value("casewatch_judge_requests_total", labels) or 0.0

        try:
            wait_for(lambda: judge.request_count == TURNS, "every turn waiting on the judge")
            for n in range(1, TURNS + 1):
                gate.release()
                wait_for(lambda n=n: judged() == n, f"verdict {n} collected")  # type: ignore[misc]
            thread.join(timeout=60)
            assert not thread.is_alive(), "the run did not end once every turn was stored"
        finally:
            for _ in range(TURNS):
                gate.release()  # a failing run must not keep its judge calls waiting
            daemon.stop()
            thread.join(timeout=60)
            daemon.close()
            close_opened(source, dlq, store, evaluator)

    store = Store(url)
    try:
        assert rows_per_event(store) == {f"evt-{i}": 1 for i in range(TURNS)}
    finally:
        store.close()
    # Once read to its end, the file is not polled again: the one empty poll is the one that
    # found the end.
    assert source.empty_polls <= 1
    # A few turns per event (the records read, three verdicts, the end): the loop slept in
    # between, however long the judge took.
    assert heartbeat.ticks <= 4 * (1 + TURNS) + 4, heartbeat.ticks
