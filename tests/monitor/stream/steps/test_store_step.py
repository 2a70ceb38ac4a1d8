"""The store step against a real database (SQLite and PostgreSQL via the ``store`` fixture)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from consumers.dlq import FileDeadLetterSink, decode_file_value
from monitor.errors import MessageRejected
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import Backoff, ManualClock
from monitor.schema.turn import TurnEvent
from monitor.storage.audit import counts
from monitor.storage.store import Store
from monitor.stream.recorder import StreamRecorder
from monitor.stream.steps.base import Envelope, JudgedTurn
from monitor.stream.steps.store import StoreStep
from tests.fixtures import refused_rows
from tests.fixtures.databases import make_turn, make_verdict
from tests.monitor.stream.steps.helpers import Recorder, env


@pytest.fixture
def dlq(tmp_path: Path) -> Iterator[FileDeadLetterSink]:
    sink = FileDeadLetterSink(tmp_path / "dead-letters.jsonl")
    yield sink
    sink.close()


def _judged(event_id: str, offset: int) -> Envelope[JudgedTurn]:
    turn = make_turn(event_id)
    return env(JudgedTurn(turn, make_verdict(turn)), offset=offset)


def test_batches_are_saved_then_marked_done(store: Store, dlq: FileDeadLetterSink) -> None:
    registry = CollectorRegistry()
    done = Recorder()
    step = StoreStep(
        done, store, StreamRecorder(Metrics(registry)), ManualClock(), batch_size=10, dlq=dlq
    )
    for i in range(3):
        step.submit(_judged(f"e{i}", i))
    assert done.items == []  # nothing is done before it is durable
    step.poll()
    assert done.offsets == [0, 1, 2]
    assert counts(store)["verdicts"] == 3
    assert registry.get_sample_value("casewatch_stored_total", {"outcome": "inserted"}) == 3


def test_replays_are_stored_once_and_counted_as_duplicates(
    store: Store, dlq: FileDeadLetterSink
) -> None:
    registry = CollectorRegistry()
    done = Recorder()
    step = StoreStep(done, store, StreamRecorder(Metrics(registry)), ManualClock(), dlq=dlq)
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


def test_a_full_batch_is_written_on_submit(store: Store, dlq: FileDeadLetterSink) -> None:
    done = Recorder()
    step = StoreStep(
        done,
        store,
        StreamRecorder(Metrics(CollectorRegistry())),
        ManualClock(),
        batch_size=2,
        dlq=dlq,
    )
    for i in range(3):
        step.submit(_judged(f"e{i}", i))
    assert done.offsets == [0, 1]
    assert step.buffered == 1


def test_database_errors_are_retried_with_backoff_and_never_mark_done(
    tmp_path: Path, dlq: FileDeadLetterSink
) -> None:
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
        dlq=dlq,
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


def test_join_writes_what_is_buffered_and_joins_downstream(
    store: Store, dlq: FileDeadLetterSink
) -> None:
    done = Recorder()
    step = StoreStep(
        done, store, StreamRecorder(Metrics(CollectorRegistry())), ManualClock(), dlq=dlq
    )
    step.submit(_judged("e0", 0))
    step.join(timeout=5)
    assert done.offsets == [0]
    assert len(done.joins) == 1


def test_join_gives_up_at_the_deadline(tmp_path: Path, dlq: FileDeadLetterSink) -> None:
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")  # never migrated: every write fails
    done = Recorder()
    step = StoreStep(
        done,
        store,
        StreamRecorder(Metrics(CollectorRegistry())),
        ManualClock(),
        backoff=Backoff(0.01, 0.01),
        dlq=dlq,
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


def test_a_turn_the_database_refuses_is_dead_lettered_and_the_stream_moves_on(
    store: Store, dlq: FileDeadLetterSink
) -> None:
    # 60 turns, 3 of which the database refuses (a NUL on PostgreSQL), stalled the
    # stream forever. Now the other 57 are stored and all 60 are done, in one pass.
    registry = CollectorRegistry()
    done = Recorder()
    step = StoreStep(
        done, store, StreamRecorder(Metrics(registry)), ManualClock(), batch_size=16, dlq=dlq
    )
    kinds = refused_rows.kinds(store.dialect)
    bad_offsets = {7: kinds[0], 31: kinds[1 % len(kinds)], 58: kinds[-1]}
    for offset in range(60):
        if offset in bad_offsets:
            turn, verdict = refused_rows.refused_pair(
                store.dialect, bad_offsets[offset], f"bad-{offset}"
            )
            step.submit(env(JudgedTurn(turn, verdict), offset=offset))
        else:
            step.submit(_judged(f"e{offset}", offset))
    step.join(timeout=30)

    assert sorted(done.offsets) == list(range(60))
    assert step.healthy and step.buffered == 0
    assert counts(store)["verdicts"] == 57
    get = registry.get_sample_value
    assert get("casewatch_dead_letter_total", {"reason": "unstorable"}) == 3
    assert get("casewatch_stored_total", {"outcome": "inserted"}) == 57
    records = [json.loads(line) for line in dlq.path.read_text().splitlines()]
    assert [(r["offset"], r["reason"]) for r in records] == [
        (o, "unstorable") for o in sorted(bad_offsets)
    ]
    for record in records:
        event_id = f"bad-{record['offset']}"
        assert event_id in record["detail"] and "storage.url" not in record["detail"]
        # The turn itself is in the record, so it can be fixed and replayed.
        assert TurnEvent.model_validate_json(decode_file_value(record) or b"").event_id == event_id


def test_an_unstorable_turn_waits_for_the_dead_letter_queue(store: Store, tmp_path: Path) -> None:
    sink = FileDeadLetterSink(tmp_path / "dlq.jsonl")
    sink.close()  # a sink that refuses writes, like an unreachable dead-letter topic
    done = Recorder()
    registry = CollectorRegistry()
    step = StoreStep(
        done, store, StreamRecorder(Metrics(registry)), ManualClock(), batch_size=2, dlq=sink
    )
    kind = refused_rows.kinds(store.dialect)[0]
    turn, verdict = refused_rows.refused_pair(store.dialect, kind, "bad-0")
    step.submit(env(JudgedTurn(turn, verdict), offset=0))
    step.submit(_judged("e1", 1))
    step.poll()

    assert done.offsets == [1]  # the stored one is done; the refused one is held, not lost
    assert step.buffered == 1
    get = registry.get_sample_value
    assert get("casewatch_dead_letter_total", {"reason": "unstorable"}) is None
    assert get("casewatch_dead_letters_held_total", {"why": "unavailable"}) == 1
    # Held, it holds back the writes after it: the buffer fills and intake is refused.
    step.submit(_judged("e2", 2))
    step.poll()
    with pytest.raises(MessageRejected):
        step.submit(_judged("e3", 3))
    assert done.offsets == [1] and counts(store)["verdicts"] == 1
    assert get("casewatch_dead_letters_held_total", {"why": "unavailable"}) == 3
    step.join(timeout=0)
    assert done.offsets == [1]


def test_an_unstorable_turn_is_done_once_its_dead_letter_is_written(
    store: Store, dlq: FileDeadLetterSink
) -> None:
    done = Recorder()
    registry = CollectorRegistry()
    step = StoreStep(done, store, StreamRecorder(Metrics(registry)), ManualClock(), dlq=dlq)
    kind = refused_rows.kinds(store.dialect)[0]
    turn, verdict = refused_rows.refused_pair(store.dialect, kind, "bad-0")
    step.submit(env(JudgedTurn(turn, verdict), offset=0))
    step.submit(_judged("e1", 1))
    step.poll()  # stored, and the refused turn sent: done on the poll that sees it written
    assert done.offsets == [1] and step.dead_letters_pending == 1 and step.buffered == 0
    assert [json.loads(line)["offset"] for line in dlq.path.read_text().splitlines()] == [0]
    step.poll()
    assert done.offsets == [1, 0] and step.dead_letters_pending == 0
    assert done.items[1].payload.turn.event_id == "bad-0"  # handed on as the judged turn
    assert registry.get_sample_value("casewatch_dead_letter_total", {"reason": "unstorable"}) == 1
