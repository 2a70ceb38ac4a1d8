"""Write-through: a judge thread stores its verdict before it takes the next turn,
so no finished verdict waits in memory for the loop; the store step only counts those and
still writes (and retries) the ones whose write-through failed."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from consumers.dlq import FileDeadLetterSink
from monitor.clock import ManualClock
from monitor.errors import StorageError
from monitor.exporter import Metrics
from monitor.models import TurnEvent, Verdict
from monitor.storage.audit import counts
from monitor.storage.store import SaveResult, Store
from monitor.stream.pipeline import write_through
from monitor.stream.recorder import StreamRecorder
from monitor.stream.steps.judge import JudgeStep
from monitor.stream.steps.store import StoreStep
from tests.fixtures.databases import make_turn
from tests.monitor.stream.steps.helpers import CostLog, GatedEvaluator, Recorder, env
from tests.monitor.stream.steps.test_judge_step import _until


@pytest.fixture
def sink(tmp_path: Path) -> Iterator[FileDeadLetterSink]:
    dead_letters = FileDeadLetterSink(tmp_path / "dead-letters.jsonl")
    yield dead_letters
    dead_letters.close()


class FlakyWriter:
    """The real store, refusing the write-through of chosen events (a brief outage)."""

    def __init__(self, store: Store, refuse: set[str]) -> None:
        self.store = store
        self.refuse = refuse

    def save_one(self, turn: TurnEvent, verdict: Verdict) -> int | None:
        if turn.event_id in self.refuse:
            raise StorageError("simulated: database unreachable")
        return write_through(self.store, turn, verdict)


class CountingStore:
    """What the store step writes (the write-through must not be written twice)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.batches: list[list[str]] = []

    def save_batch(self, items: Sequence[tuple[TurnEvent, Verdict]]) -> SaveResult:
        self.batches.append([turn.event_id for turn, _ in items])
        return self.store.save_batch(items)


def test_verdicts_are_stored_by_the_judge_thread_before_the_loop_collects_them(
    tmp_path: Path,
) -> None:
    store = Store(f"sqlite:///{tmp_path / 'w.db'}")
    store.migrate()
    registry = CollectorRegistry()
    metrics = StreamRecorder(Metrics(registry))
    done = Recorder()
    counting = CountingStore(store)
    store_step = StoreStep(done, counting, metrics, ManualClock(), dlq=sink)
    writer = FlakyWriter(store, refuse={"e3"})
    evaluator = GatedEvaluator()
    judge = JudgeStep(store_step, evaluator, metrics, CostLog(), 2, 10, persist=writer.save_one)
    try:
        for i in range(5):
            judge.submit(env(make_turn(f"e{i}"), offset=i))
        # Stored with no poll of the loop: the judge threads wrote them as they finished.
        deadline = time.monotonic() + 10  # a liveness bound, not a performance one
        while counts(store)["verdicts"] < 4 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert counts(store)["verdicts"] == 4
        assert done.items == []  # not done (committable) before the loop collects them
        _until(lambda: len(done.items) == 5, judge)
        # The store step wrote only the one whose write-through failed, and counted all.
        assert counting.batches == [["e3"]]
        assert counts(store)["verdicts"] == 5
        inserted = registry.get_sample_value("casewatch_stored_total", {"outcome": "inserted"})
        assert inserted == 5
    finally:
        judge.close()
        store.close()


def test_a_write_through_replay_counts_as_a_duplicate(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'w.db'}")
    store.migrate()
    registry = CollectorRegistry()
    metrics = StreamRecorder(Metrics(registry))
    done = Recorder()
    store_step = StoreStep(done, CountingStore(store), metrics, ManualClock(), dlq=sink)
    writer = FlakyWriter(store, refuse=set())
    judge = JudgeStep(
        store_step, GatedEvaluator(), metrics, CostLog(), 1, 10, persist=writer.save_one
    )
    try:
        judge.submit(env(make_turn("same"), offset=0))
        judge.submit(env(make_turn("same"), offset=1))  # a producer retry: judged twice
        _until(lambda: len(done.items) == 2, judge)
        assert counts(store)["verdicts"] == 1
        for outcome, n in (("inserted", 1), ("duplicate", 1)):
            assert registry.get_sample_value("casewatch_stored_total", {"outcome": outcome}) == n
    finally:
        judge.close()
        store.close()
