"""Unsampled turns kept for feedback: committed at once, kept redacted by a writer thread on a
real SQLite store, every turn not kept counted."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from monitor.redaction import Redactor
from monitor.redaction.config import RedactionConfig
from monitor.schema.turn import TurnEvent
from monitor.storage.retained_turns import RetainedTurns
from monitor.storage.store import Store
from monitor.storage.tables import retained_turns
from monitor.stream.steps.retain import RetainingDone
from tests.fixtures.databases import make_turn
from tests.monitor.stream.steps.helpers import Recorder, env
from tests.support.waiting import wait_for


class Counts:
    def __init__(self) -> None:
        self.by_outcome: dict[str, int] = {}

    def record_retained(self, outcome: str, count: int) -> None:
        self.by_outcome[outcome] = self.by_outcome.get(outcome, 0) + count


def kept(store: Store) -> dict[str, Any]:
    with store.transaction(write=False) as conn:
        rows = conn.execute(sa.select(retained_turns.c.event_id, retained_turns.c.event)).all()
    return {row.event_id: json.loads(row.event) for row in rows}


def test_unsampled_turns_are_committed_at_once_and_kept_redacted(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'kept.db'}")
    store.migrate()
    done, counts = Recorder(), Counts()
    redactor = Redactor(RedactionConfig().policy())
    step = RetainingDone(
        done, RetainedTurns(store), counts, redact=lambda t: redactor.redact_turn(t).turn
    )
    try:
        for i in range(3):
            turn = make_turn(f"evt-{i}", answer=f"Write to jo{i}@example.com")
            step.submit(env(turn, offset=i))
        step.submit(env(b"not a turn", offset=3))  # any other message: committed, not kept
        assert done.offsets == [0, 1, 2, 3]
        wait_for(lambda: counts.by_outcome.get("stored") == 3, what="3 turns kept")
    finally:
        step.close()
    rows = kept(store)
    assert sorted(rows) == ["evt-0", "evt-1", "evt-2"]
    assert all("@example.com" not in row["answer"] for row in rows.values())
    store.close()


def test_a_turn_already_redacted_is_kept_as_it_came(tmp_path: Path) -> None:
    # No redaction left to do (the chain redacted before judging): the row is built as the
    # turn is handed over, and what is kept reads back as the same turn.
    store = Store(f"sqlite:///{tmp_path / 'kept.db'}")
    store.migrate()
    done, counts = Recorder(), Counts()
    step = RetainingDone(done, RetainedTurns(store), counts)
    turns = [make_turn(f"evt-{i}", answer=f"Answer {i}") for i in range(3)]
    try:
        for i, turn in enumerate(turns):
            step.submit(env(turn, offset=i))
        assert done.offsets == [0, 1, 2]
        wait_for(lambda: counts.by_outcome.get("stored") == 3, what="3 turns kept")
    finally:
        step.close()
    rows = kept(store)
    assert [TurnEvent.model_validate(rows[t.event_id]) for t in turns] == turns
    # The text kept is the turn's own serialisation, character for character.
    with store.transaction(write=False) as conn:
        texts = dict(
            conn.execute(sa.select(retained_turns.c.event_id, retained_turns.c.event)).all()
        )
    assert texts == {t.event_id: t.model_dump_json() for t in turns}
    store.close()


class HeldWriter:
    """The store's writer, held at its first batch until ``release`` (a slow database)."""

    def __init__(self, records: RetainedTurns) -> None:
        self._records = records
        self.writing = threading.Event()
        self.release = threading.Event()

    def retain(
        self, items: Sequence[tuple[str, str, str, str]], now: Any = None, places: Any = ()
    ) -> int:
        self.writing.set()
        self.release.wait()
        return self._records.retain(items, now, places)


def test_a_full_queue_drops_what_it_cannot_hold_counted_and_commits_it_all(
    tmp_path: Path,
) -> None:
    store = Store(f"sqlite:///{tmp_path / 'kept.db'}")
    store.migrate()
    done, counts = Recorder(), Counts()
    writer = HeldWriter(RetainedTurns(store))
    step = RetainingDone(done, writer, counts, max_queued=3)
    try:
        step.submit(env(make_turn("evt-0"), offset=0))
        wait_for(writer.writing.is_set, what="the writer holding its first batch")
        for i in range(1, 6):  # three fit the queue, two do not
            step.submit(env(make_turn(f"evt-{i}"), offset=i))
        assert done.offsets == [0, 1, 2, 3, 4, 5]  # every one committed, kept or not
        assert counts.by_outcome == {"dropped": 2}
        writer.release.set()
        wait_for(lambda: counts.by_outcome.get("stored") == 4, what="4 turns kept")
        step.submit(env(make_turn("evt-6"), offset=6))  # room again: kept
        wait_for(lambda: counts.by_outcome.get("stored") == 5, what="5 turns kept")
    finally:
        writer.release.set()
        step.close()
    assert sorted(kept(store)) == ["evt-0", "evt-1", "evt-2", "evt-3", "evt-6"]
    assert counts.by_outcome == {"dropped": 2, "stored": 5}
    store.close()


def test_turns_the_database_does_not_take_are_counted() -> None:
    # A PostgreSQL URL where no server listens: every write fails as in an outage.
    down = Store("postgresql+psycopg://postgres@127.0.0.1:9/none?connect_timeout=2")
    done, counts = Recorder(), Counts()
    step = RetainingDone(done, RetainedTurns(down), counts)
    try:
        step.submit(env(make_turn("evt-1")))
        assert done.offsets == [0]  # committed without waiting for the database
        wait_for(lambda: counts.by_outcome.get("failed") == 1, what="the failure counted")
    finally:
        step.close()
        down.close()
