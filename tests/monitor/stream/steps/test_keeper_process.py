"""The keeper's process: unsampled turns kept from their records' bytes in a process of their
own, decoded and redacted there with the chain's decisions; what it cannot keep counted, a
batch the database refuses failed, a process that died failed and replaced."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import psutil
import sqlalchemy as sa

from monitor.config.settings import load_settings
from monitor.runtime.clock import ManualClock
from monitor.storage.retained_turns import RetainedTurns
from monitor.storage.store import Store
from monitor.storage.tables import retained_places, retained_turns
from monitor.stream.pipeline import PipelineConfig
from monitor.stream.steps.keeper_process import KeeperProcess, Kept
from monitor.stream.steps.retain import Record, RetainingDone
from monitor.stream.turn_steps import turn_decisions
from tests.fixtures.databases import make_turn
from tests.monitor.stream.steps.helpers import Recorder, env
from tests.support.waiting import wait_for

T = 1_767_225_600.0  # 2026-01-01T00:00:00Z


class Counts:
    def __init__(self) -> None:
        self.by_outcome: dict[str, int] = {}

    def record_retained(self, outcome: str, count: int) -> None:
        self.by_outcome[outcome] = self.by_outcome.get(outcome, 0) + count


def _keeper(url: str) -> KeeperProcess:
    config = PipelineConfig.from_settings(load_settings(None))
    decisions = turn_decisions(config.turn, sampling=config.sampling)
    return KeeperProcess(url, decisions, ManualClock(T))


def _value(event_id: str) -> bytes:
    turn = make_turn(event_id, answer=f"Write to {event_id}@example.com")
    return turn.model_dump_json().encode()


def _kept(store: Store) -> dict[str, tuple[dict[str, object], float]]:
    r = retained_turns.c
    with store.transaction(write=False) as conn:
        rows = conn.execute(sa.select(r.event_id, r.event, r.retained_at)).all()
    return {row.event_id: (json.loads(row.event), row.retained_at.timestamp()) for row in rows}


def _total(results: list[Kept]) -> tuple[int, int, int]:
    return (
        sum(k.stored for k in results),
        sum(k.dropped for k in results),
        sum(k.failed for k in results),
    )


def test_records_are_decoded_redacted_and_kept_in_the_process(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'kept.db'}")
    store.migrate()
    keeper = _keeper(store.url)
    try:
        records = [Record("t", _value("a"), True), Record("t", b"{not json", True)]
        results = [*keeper.keep([*records, Record("t", None, False)])]
        results += keeper.keep([Record("t", _value("b"), True)])
        results += keeper.collect(every=True)
    finally:
        keeper.close()
    # Two records that are no turn: counted dropped, never kept.
    assert _total(results) == (2, 2, 0)
    rows = _kept(store)
    assert sorted(rows) == ["a", "b"]
    for event_id, (event, at) in rows.items():
        assert event["event_id"] == event_id
        assert f"{event_id}@example.com" not in str(event["answer"])  # redacted there
        assert at == T  # when the daemon's clock says, not the process's
    store.close()


def test_a_batch_the_database_refuses_is_failed_with_the_reason(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"  # no schema: the insert fails
    keeper = _keeper(url)
    try:
        results = [*keeper.keep([Record("t", _value("a"), True)]), *keeper.collect(every=True)]
    finally:
        keeper.close()
    assert _total(results) == (0, 0, 1)
    assert "retained_turns" in str(results[0].error)


def test_a_dead_process_fails_its_batch_and_is_replaced(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'kept.db'}")
    store.migrate()
    keeper = _keeper(store.url)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    try:
        keeper.start()
        assert _total(
            [*keeper.keep([Record("t", _value("a"), True)]), *keeper.collect(every=True)]
        ) == (
            1,
            0,
            0,
        )
        # The pool's process: forked by the forkserver (a child of this process), after it.
        workers = [
            p
            for server in psutil.Process().children()
            if "forkserver" in " ".join(server.cmdline())
            for p in server.children()
            if p.pid not in before
        ]
        assert workers, "the keeper's process"
        for p in workers:
            os.kill(p.pid, signal.SIGKILL)
        wait_for(lambda: not any(p.is_running() for p in workers), what="the process gone")
        lost = [*keeper.keep([Record("t", _value("b"), True)]), *keeper.collect(every=True)]
        assert _total(lost) == (0, 0, 1) and "stopped" in str(lost[0].error)
        again = [*keeper.keep([Record("t", _value("c"), True)]), *keeper.collect(every=True)]
        assert _total(again) == (1, 0, 0)
    finally:
        keeper.close()
    assert sorted(_kept(store)) == ["a", "c"]
    store.close()


def test_the_step_keeps_turns_from_their_records_through_the_process(tmp_path: Path) -> None:
    """``RetainingDone`` with a keeper: a turn with its record's value goes to the process; one
    without (assembled from spans) is written on the thread; both kept, counted once."""
    store = Store(f"sqlite:///{tmp_path / 'kept.db'}")
    store.migrate()
    done, counts = Recorder(), Counts()
    step = RetainingDone(done, RetainedTurns(store), counts, keeper=_keeper(store.url))
    try:
        raw = _value("from-bytes")
        step.submit(env(make_turn("from-bytes"), offset=0)._replace(raw=raw))
        step.submit(env(make_turn("assembled"), offset=1))
        assert done.offsets == [0, 1]  # committed at once
        wait_for(lambda: counts.by_outcome.get("stored") == 2, what="2 turns kept")
    finally:
        step.close()
    assert sorted(_kept(store)) == ["assembled", "from-bytes"]
    assert counts.by_outcome == {"stored": 2}
    store.close()


def test_a_changed_turn_leaves_its_record_bytes_behind() -> None:
    """Only bytes that are the turn as it stands ride along: a step that changes the turn (the
    redact step, replacing what it found) lets them go, so they are never kept for it."""
    turn = make_turn("a", answer="Write to a@example.com")
    message = env(turn)._replace(raw=turn.model_dump_json().encode())
    assert message.replace(make_turn("a")).raw is None


def test_a_record_is_kept_as_its_decoded_turn_never_as_its_bytes(tmp_path: Path) -> None:
    """A record whose JSON repeats a key decodes to one of the values, the one the daemon's
    redaction saw (and found clean); the other, which it never saw, is not kept."""
    store = Store(f"sqlite:///{tmp_path / 'kept.db'}")
    store.migrate()
    value = _value("dup").replace(
        b'"query":', b'"query": "Reach me at hidden@example.com", "query":', 1
    )
    keeper = _keeper(store.url)
    try:
        results = [*keeper.keep([Record("t", value, False)]), *keeper.collect(every=True)]
    finally:
        keeper.close()
    assert _total(results) == (1, 0, 0)
    event, _ = _kept(store)["dup"]
    assert "hidden@example.com" not in json.dumps(event)
    assert event["query"] == make_turn("dup").query
    store.close()


def _places(store: Store) -> list[tuple[str, int, dict[str, int]]]:
    """The batches of places kept: topic, partition, and each turn's offset."""
    p = retained_places.c
    query = sa.select(p.source_topic, p.source_partition, p.event_ids, p.offsets).order_by(p.id)
    with store.transaction(write=False) as conn:
        return [
            (row.source_topic, row.source_partition,
             dict(zip(json.loads(row.event_ids), json.loads(row.offsets), strict=True)))
            for row in conn.execute(query)
        ]  # fmt: skip


def test_the_step_keeps_turns_from_kafka_as_their_records_places(tmp_path: Path) -> None:
    """``places`` (a Kafka source): a turn that came with its record's value is kept as the
    record's place, a row per batch and partition, nothing of its text written, through the
    process and on the thread alike; one without (assembled from spans) is still kept as its
    redacted row."""
    for through_process in (True, False):
        store = Store(f"sqlite:///{tmp_path / f'kept-{through_process}.db'}")
        store.migrate()
        done, counts = Recorder(), Counts()
        keeper = _keeper(store.url) if through_process else None
        step = RetainingDone(done, RetainedTurns(store), counts, keeper=keeper, places=True)
        try:
            message = env(make_turn("from-kafka"), offset=41)
            step.submit(message._replace(raw=_value("from-kafka")))
            step.submit(env(make_turn("assembled"), offset=42))
            also = env(make_turn("also-from-kafka"), offset=43)
            step.submit(also._replace(raw=_value("also-from-kafka")))
            assert done.offsets == [41, 42, 43]  # committed at once
            wait_for(lambda c=counts: c.by_outcome.get("stored") == 3, what="3 turns kept")
        finally:
            step.close()
        tp = message.tp
        assert _places(store) == [
            (tp.topic, tp.partition, {"from-kafka": 41, "also-from-kafka": 43})
        ]
        r = retained_turns.c
        with store.transaction(write=False) as conn:
            rows = conn.execute(sa.select(r.event_id, r.event, r.source_topic)).all()
        assert [(row.event_id, row.source_topic) for row in rows] == [("assembled", None)]
        assert json.loads(rows[0].event)["event_id"] == "assembled"
        assert counts.by_outcome == {"stored": 3}
        store.close()
