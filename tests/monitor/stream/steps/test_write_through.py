"""Write-through (``StoreStep.write_now`` as the judge step's ``on_judged``): a judge thread
stores its verdict before it takes the next turn, so no finished verdict waits in memory for the
loop; the store step writes (and retries) only the ones whose write-through failed, and counts
every verdict once."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from consumers.dlq import FileDeadLetterSink
from monitor.errors import StorageError
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.schema.turn import TurnEvent, Verdict
from monitor.storage.audit import counts
from monitor.storage.store import SaveResult, Store
from monitor.stream.recorder import StreamRecorder
from monitor.stream.steps.judge import JudgeStep
from monitor.stream.steps.store import StoreStep
from tests.fixtures.databases import make_turn
from tests.monitor.stream.steps.helpers import GatedEvaluator, Recorder, env
from tests.support.waiting import wait_for


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    db = Store(f"sqlite:///{tmp_path / 'w.db'}")
    db.migrate()
    yield db
    db.close()


class FlakyWriter:
    """The real store, failing the first write of chosen events (a brief outage) and noting
    every write: which events, and whether a judge thread or the loop's thread made it."""

    def __init__(self, store: Store, refuse: set[str]) -> None:
        self.store = store
        self.refuse = set(refuse)
        self.writes: list[tuple[list[str], bool]] = []  # (event ids, on the loop's thread)
        self._lock = threading.Lock()

    def save_batch(self, items: Sequence[tuple[TurnEvent, Verdict]]) -> SaveResult:
        ids = [turn.event_id for turn, _ in items]
        with self._lock:
            self.writes.append((ids, threading.current_thread() is threading.main_thread()))
            failing = self.refuse & set(ids)
            self.refuse -= failing
        if failing:
            raise StorageError("simulated: database unreachable")
        return self.store.save_batch(items)


def test_verdicts_are_stored_by_the_judge_thread_before_the_loop_collects_them(
    store: Store, sink: FileDeadLetterSink
) -> None:
    registry = CollectorRegistry()
    metrics = StreamRecorder(Metrics(registry))
    done = Recorder()
    writer = FlakyWriter(store, refuse={"e3"})
    store_step = StoreStep(done, writer, metrics, ManualClock(), dlq=sink)
    judge = JudgeStep(store_step, GatedEvaluator(), metrics, 2, 10, on_judged=store_step.write_now)
    try:
        for i in range(5):
            judge.submit(env(make_turn(f"e{i}"), offset=i))
        # Stored with no poll of the loop: the judge threads wrote them as they finished.
        wait_for(lambda: counts(store)["verdicts"] >= 4, "the judge threads' writes")
        assert counts(store)["verdicts"] == 4
        assert done.items == []  # not done (committable) before the loop collects them
        wait_for(lambda: len(done.items) == 5, tick=judge.poll)
        # The loop's thread wrote only the one whose write-through failed, and counted all.
        assert [ids for ids, on_loop in writer.writes if on_loop] == [["e3"]]
        assert sorted(ids[0] for ids, on_loop in writer.writes if not on_loop) == [
            f"e{i}" for i in range(5)
        ]
        assert counts(store)["verdicts"] == 5
        get = registry.get_sample_value
        assert get("casewatch_stored_total", {"outcome": "inserted"}) == 5
        assert get("casewatch_stored_total", {"outcome": "duplicate"}) == 0
    finally:
        judge.close()


def test_a_write_through_replay_counts_as_a_duplicate(
    store: Store, sink: FileDeadLetterSink
) -> None:
    registry = CollectorRegistry()
    metrics = StreamRecorder(Metrics(registry))
    done = Recorder()
    writer = FlakyWriter(store, refuse=set())
    store_step = StoreStep(done, writer, metrics, ManualClock(), dlq=sink)
    judge = JudgeStep(store_step, GatedEvaluator(), metrics, 1, 10, on_judged=store_step.write_now)
    try:
        judge.submit(env(make_turn("same"), offset=0))
        judge.submit(env(make_turn("same"), offset=1))  # a producer retry: judged twice
        wait_for(lambda: len(done.items) == 2, tick=judge.poll)
        assert counts(store)["verdicts"] == 1
        assert all(not on_loop for _, on_loop in writer.writes)  # nothing written twice
        for outcome, n in (("inserted", 1), ("duplicate", 1)):
            assert registry.get_sample_value("casewatch_stored_total", {"outcome": outcome}) == n
    finally:
        judge.close()
