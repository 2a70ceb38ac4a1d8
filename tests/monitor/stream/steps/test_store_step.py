"""The store step against a real database (SQLite and PostgreSQL via the ``store`` fixture)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from monitor.clock import Backoff, ManualClock
from monitor.errors import MessageRejected
from monitor.exporter import Metrics
from monitor.storage.audit import counts
from monitor.storage.store import Store
from monitor.stream.recorder import StreamRecorder
from monitor.stream.steps.base import Envelope, JudgedTurn
from monitor.stream.steps.store import StoreStep
from tests.fixtures.databases import make_turn, make_verdict
from tests.monitor.stream.steps.helpers import Recorder, env


def _judged(event_id: str, offset: int) -> Envelope[JudgedTurn]:
    turn = make_turn(event_id)
    return env(JudgedTurn(turn, make_verdict(turn)), offset=offset)


def test_batches_are_saved_then_marked_done(store: Store) -> None:
    registry = CollectorRegistry()
    done = Recorder()
    step = StoreStep(done, store, StreamRecorder(Metrics(registry)), ManualClock(), batch_size=10)
    for i in range(3):
        step.submit(_judged(f"e{i}", i))
    assert done.items == []  # nothing is done before it is durable
    step.poll()
    assert done.offsets == [0, 1, 2]
    assert counts(store)["verdicts"] == 3
    assert registry.get_sample_value("casewatch_stored_total", {"outcome": "inserted"}) == 3


def test_replays_are_stored_once_and_counted_as_duplicates(store: Store) -> None:
    registry = CollectorRegistry()
    done = Recorder()
    step = StoreStep(done, store, StreamRecorder(Metrics(registry)), ManualClock())
    step.submit(_judged("e1", 0))
    step.poll()
    step.submit(_judged("e1", 1))
    step.submit(_judged("e1", 2))
    step.poll()
    assert done.offsets == [0, 1, 2]
    assert counts(store)["verdicts"] == 1
    get = registry.get_sample_value
    assert get("casewatch_stored_total", {"outcome": "inserted"}) == 1
    assert get("casewatch_stored_total", {"outcome": "duplicate"}) == 2


def test_a_full_batch_is_written_on_submit(store: Store) -> None:
    done = Recorder()
    step = StoreStep(
        done, store, StreamRecorder(Metrics(CollectorRegistry())), ManualClock(), batch_size=2
    )
    for i in range(3):
        step.submit(_judged(f"e{i}", i))
    assert done.offsets == [0, 1]
    assert step.buffered == 1


def test_database_errors_are_retried_with_backoff_and_never_mark_done(tmp_path: Path) -> None:
    # A database without the schema fails every write, like one that is down; migrating it
    # is the "database is back" moment.
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    registry = CollectorRegistry()
    clock = ManualClock()
    done = Recorder()
    step = StoreStep(
        done,
        store,
        StreamRecorder(Metrics(registry)),
        clock,
        batch_size=2,
        backoff=Backoff(1.0, 8.0),
    )
    try:
        step.submit(_judged("e0", 0))
        step.poll()
        assert not step.healthy
        assert step.last_error is not None and "db upgrade" in step.last_error
        step.submit(_judged("e1", 1))
        with pytest.raises(MessageRejected):
            step.submit(_judged("e2", 2))
        step.poll()  # inside the backoff window: no attempt
        assert registry.get_sample_value("casewatch_storage_errors_total") == 1
        clock.advance(1.0)
        step.poll()  # second failure; the next wait doubles
        assert registry.get_sample_value("casewatch_storage_errors_total") == 2
        assert done.items == []
        store.migrate()
        clock.advance(1.9)
        step.poll()
        assert done.items == []
        clock.advance(0.1)
        step.poll()
        assert step.healthy and step.last_error is None
        assert done.offsets == [0, 1]
        assert counts(store)["verdicts"] == 2
    finally:
        store.close()


def test_join_writes_what_is_buffered_and_joins_downstream(store: Store) -> None:
    done = Recorder()
    step = StoreStep(done, store, StreamRecorder(Metrics(CollectorRegistry())), ManualClock())
    step.submit(_judged("e0", 0))
    step.join(timeout=5)
    assert done.offsets == [0]
    assert len(done.joins) == 1


def test_join_gives_up_at_the_deadline(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")  # never migrated: every write fails
    done = Recorder()
    step = StoreStep(
        done,
        store,
        StreamRecorder(Metrics(CollectorRegistry())),
        ManualClock(),
        backoff=Backoff(0.01, 0.01),
    )
    try:
        step.submit(_judged("e0", 0))
        step.join(timeout=0.1)
        assert done.items == []
        assert step.buffered == 1
    finally:
        store.close()


def test_backoff_grows_exponentially_up_to_the_cap() -> None:
    b = Backoff(initial_s=0.5, max_s=3.0, multiplier=2.0)
    assert [b.delay(n) for n in range(6)] == [0.0, 0.5, 1.0, 2.0, 3.0, 3.0]
