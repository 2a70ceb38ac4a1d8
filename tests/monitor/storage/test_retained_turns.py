"""Unsampled turns kept in SQL, on SQLite and PostgreSQL: kept once each with their time, as
their text or, read from Kafka, as their records' places a batch at a time, found by the
outcome join only when an outcome asks for them, and pruned by age and count."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from monitor.runtime.clock import ManualClock
from monitor.storage.outcomes import OutcomeRecords
from monitor.storage.retained_turns import PlaceBatch, RetainedTurns
from monitor.storage.store import Store
from monitor.storage.tables import retained_places, retained_turns
from tests.fixtures.databases import make_turn
from tests.fixtures.outcomes import case_outcome, feedback

WINDOW_S = 3600.0
NOON = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def batch(partition: int, offsets: range, topic: str = "turns") -> PlaceBatch:
    """Turns ``t-<offset>`` of conversations ``c-<offset // 10>``."""
    return PlaceBatch(
        topic,
        partition,
        [f"t-{o}" for o in offsets],
        [f"c-{o // 10}" for o in offsets],
        ["helpdesk"] * len(offsets),
        list(offsets),
    )


def kept_rows(store: Store) -> dict[str, tuple[Any, ...]]:
    r = retained_turns.c
    query = sa.select(
        r.event_id, r.event, r.retained_at, r.source_topic, r.source_partition, r.source_offset
    )
    with store.transaction(write=False) as conn:
        return {
            str(k.event_id): (
                k.event,
                k.retained_at,
                k.source_topic,
                k.source_partition,
                k.source_offset,
            )
            for k in conn.execute(query)
        }


def place_rows(store: Store) -> list[tuple[str, int, int]]:
    p = retained_places.c
    with store.transaction(write=False) as conn:
        query = sa.select(p.source_topic, p.source_partition, p.turns).order_by(p.id)
        return [(str(t), int(part), int(n)) for t, part, n in conn.execute(query)]


def test_unsampled_turns_are_kept_once_with_their_time(store: Store) -> None:
    # The driver-level insert: its SQL and its one processed timestamp, on both backends.
    clock = ManualClock(NOON.timestamp())
    kept = RetainedTurns(store, clock)
    turns = [make_turn(f"evt-{i}") for i in range(3)]
    rows = [(t.event_id, t.conversation_id, "helpdesk", t.model_dump_json()) for t in turns]
    assert kept.retain([*rows, rows[0]]) == 3  # one offered twice: kept once
    clock.advance(60)
    # Kept before: left alone (its text and time), the new one kept.
    changed = (rows[1][0], rows[1][1], "helpdesk", "{}")
    assert kept.retain([changed, ("evt-3", "conv-3", "helpdesk", "{}")]) == 2
    got = kept_rows(store)
    assert sorted(got) == ["evt-0", "evt-1", "evt-2", "evt-3"]
    assert got["evt-1"][:2] == (rows[1][3], NOON)
    assert got["evt-3"][1] == datetime(2026, 3, 1, 12, 1, tzinfo=UTC)
    # The kept time is what the window reads: the three older turns go, the newer stays.
    assert kept.prune(max_age_s=30, max_rows=100) == 3
    saved = OutcomeRecords(store, clock).save([(feedback("o-3", "evt-3"), None)])
    assert [s.joined for s in saved.inserted] == [True]


def test_places_are_a_row_a_batch_and_found_only_when_an_outcome_asks(store: Store) -> None:
    """Turns read from Kafka are kept as one row per partition per batch; no turn is a row of
    its own until an outcome asks for it: then the join copies it, with its batch's time and
    its record's place, and joins the outcome (later, never on arrival)."""
    clock = ManualClock(NOON.timestamp())
    kept = RetainedTurns(store, clock)
    records = OutcomeRecords(store, clock)
    turn = make_turn("as-text")
    row = (turn.event_id, turn.conversation_id, turn.assistant.name, turn.model_dump_json())
    assert kept.retain([row], places=[batch(0, range(0, 300)), batch(1, range(0, 200))]) == 501
    assert place_rows(store) == [("turns", 0, 300), ("turns", 1, 200)]
    assert sorted(kept_rows(store)) == ["as-text"]

    clock.advance(30)
    saved = records.save(
        [
            (feedback("f-place", "t-123"), None),  # in the first batch
            (feedback("f-unknown", "never-read"), None),
            (case_outcome("h-case", "handed_off", "c-19"), None),  # turns t-190..t-199
            (feedback("f-text", "as-text"), None),
        ]
    )
    # Only the turn kept as its text is there on arrival.
    assert {s.event.outcome_id: s.joined for s in saved.inserted} == {
        "f-place": False,
        "f-unknown": False,
        "h-case": False,
        "f-text": True,
    }
    joins = records.join_pending(WINDOW_S)
    assert (joins.joined, joins.expired) == (2, 0)
    got = kept_rows(store)
    # The feedback's turn, and every kept turn of the handed-off case: t-190..t-199, kept in
    # both partitions' batches here (ids are named by offset), copied once each.
    case = {f"t-{o}" for o in range(190, 200)}
    assert set(got) == {"as-text", "t-123"} | case
    assert got["t-123"] == ("", NOON, "turns", 0, 123)
    assert {got[e][3] for e in case} == {0}  # partition 0 read first: its copy is the one kept
    assert records.pending() == 1  # the unknown id waits for its turn
    # Asked again (a second feedback on a copied turn): joined on arrival, nothing copied twice.
    again = records.save([(feedback("f-again", "t-123"), None)])
    assert [s.joined for s in again.inserted] == [True]
    assert records.join_pending(WINDOW_S).joined == 0
    assert len(kept_rows(store)) == len(got)


def test_a_turn_read_twice_is_copied_once_from_its_oldest_batch(store: Store) -> None:
    """A rebalance reads some turns again: kept in two batches, copied once, from the older."""
    clock = ManualClock(NOON.timestamp())
    kept = RetainedTurns(store, clock)
    kept.retain([], places=[batch(0, range(0, 10))])
    clock.advance(5)
    kept.retain([], places=[batch(0, range(5, 15))])
    records = OutcomeRecords(store, clock)
    records.save([(feedback("f-7", "t-7"), None)])
    assert records.join_pending(WINDOW_S).joined == 1
    assert kept_rows(store)["t-7"] == ("", NOON, "turns", 0, 7)


def test_batches_of_places_are_pruned_by_age_and_count_with_the_rows(store: Store) -> None:
    """The bound counts turns in batches and rows alike; past it the oldest batches go, whole,
    before rows; past the age, batches and rows go alike."""
    clock = ManualClock(NOON.timestamp())
    kept = RetainedTurns(store, clock)
    kept.retain([], places=[batch(0, range(0, 100))])
    clock.advance(10)
    kept.retain([("r-1", "c-r", "helpdesk", "{}")], places=[batch(0, range(100, 150))])
    clock.advance(10)
    kept.retain([], places=[batch(1, range(0, 30))])
    # 181 turns kept; at most 90: the oldest batch (100) goes, 81 stay.
    assert kept.prune(max_age_s=3600, max_rows=90) == 100
    assert place_rows(store) == [("turns", 0, 50), ("turns", 1, 30)]
    # At most 40: the older batch goes (50), 31 stay.
    assert kept.prune(max_age_s=3600, max_rows=40) == 50
    # At most 1: the last batch goes, then the row is within the bound.
    assert kept.prune(max_age_s=3600, max_rows=1) == 30
    assert place_rows(store) == []
    assert sorted(kept_rows(store)) == ["r-1"]
    kept.retain([("r-2", "c-r", "helpdesk", "{}")])
    # No batch left: the oldest row goes.
    assert kept.prune(max_age_s=3600, max_rows=1) == 1
    assert sorted(kept_rows(store)) == ["r-2"]
    kept.retain([], places=[batch(2, range(0, 20))])
    clock.advance(100)
    kept.retain([], places=[batch(3, range(0, 5))])
    # Past the age (60 s): the row and the batch kept 100 s ago go.
    assert kept.prune(max_age_s=60, max_rows=1000) == 21
    assert place_rows(store) == [("turns", 3, 5)]
    assert kept_rows(store) == {}
