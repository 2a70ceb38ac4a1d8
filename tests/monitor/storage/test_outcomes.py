"""Outcome events in SQL, on SQLite and PostgreSQL: stored once per id, joined to turns
whichever comes first, expired past the window, paired once with the newest ok verdict."""

from __future__ import annotations

from datetime import UTC, datetime

from monitor.runtime.clock import ManualClock
from monitor.storage.outcomes import OutcomeRecords
from monitor.storage.store import Store
from monitor.storage.tables import retained_turns
from tests.fixtures.databases import make_turn, make_verdict
from tests.fixtures.outcomes import case_outcome, feedback
from tests.fixtures.turns import seed_turn

WINDOW_S = 3600.0


def test_an_outcome_is_stored_once_and_joined_on_arrival_when_its_turn_is_there(
    store: Store,
) -> None:
    turn = make_turn("evt-1")
    store.save(turn, make_verdict(turn))
    records = OutcomeRecords(store)
    first = records.save([(feedback("o-1", "evt-1"), "redacted"), (feedback("o-2", "evt-x"), None)])
    assert {(s.event.outcome_id, s.joined) for s in first.inserted} == {
        ("o-1", True),
        ("o-2", False),
    }
    assert (first.duplicates, first.refused) == (0, [])
    # Sent again, and twice within one batch: nothing new.
    again = records.save([(feedback("o-1", "evt-1"), None), (feedback("o-1", "evt-1"), None)])
    assert (again.inserted, again.duplicates) == ([], 2)
    rows = records.for_turn("evt-1")
    assert [(r["outcome_id"], r["comment"], r["polarity"]) for r in rows] == [
        ("o-1", "redacted", "negative")
    ]
    assert records.pending() == 1


def test_a_turn_stored_after_its_outcome_joins_it_later_and_the_window_expires_the_rest(
    store: Store,
) -> None:
    clock = ManualClock()
    records = OutcomeRecords(store, clock)
    saved = records.save(
        [
            (feedback("early", "evt-late"), None),
            (feedback("never", "evt-unknown"), None),
            (case_outcome("handoff", "handed_off", "conv-evt-late"), None),
        ]
    )
    assert not any(s.joined for s in saved.inserted)
    nothing = records.join_pending(WINDOW_S)
    assert (nothing.joined, nothing.expired) == (0, 0)
    turn = make_turn("evt-late")  # conversation "conv-evt-late"
    store.save(turn, make_verdict(turn))
    clock.advance(60)
    joins = records.join_pending(WINDOW_S)
    assert (joins.joined, joins.expired) == (2, 0)
    assert records.pending() == 1
    clock.advance(WINDOW_S)
    expired = records.join_pending(WINDOW_S)
    assert (expired.joined, expired.expired) == (0, 1)
    assert records.pending() == 0
    # An expired outcome is not joined even if its turn comes after all.
    late = make_turn("evt-unknown")
    store.save(late, make_verdict(late))
    assert records.join_pending(WINDOW_S).joined == 0


def test_an_outcome_joins_a_retained_unsampled_turn(store: Store) -> None:
    turn = make_turn("evt-kept")
    with store.transaction(write=True) as conn:
        conn.execute(
            retained_turns.insert().values(
                event_id=turn.event_id,
                conversation_id=turn.conversation_id,
                assistant_name="helpdesk",
                event=turn.model_dump_json(),
                retained_at=datetime(2026, 3, 1, tzinfo=UTC),
            )
        )
    saved = OutcomeRecords(store).save([(feedback("o-k", "evt-kept"), None)])
    assert [s.joined for s in saved.inserted] == [True]


def test_feedback_pairs_once_with_the_newest_ok_verdict(store: Store) -> None:
    # "bad" is severe under its newest verdict, "good" none; "failed" has only judge_failed.
    seed_turn(store, "bad", scores={"hallucination": 0.9})
    seed_turn(store, "bad", scores={"hallucination": 0.05}, config_hash="cfg-b")
    seed_turn(store, "good")
    seed_turn(store, "failed", failed=True)
    records = OutcomeRecords(store)
    records.save(
        [
            (feedback("f-bad", "bad"), None),
            (feedback("f-good-down", "good"), None),
            (feedback("f-good-up", "good", thumbs="up"), None),
            (feedback("f-neutral", "good", thumbs=None, rating={"value": 3}), None),
            (feedback("f-failed", "failed"), None),
            (case_outcome("c-1", "reopened", "conv-bad"), None),
        ]
    )
    pairs = records.pair_feedback()
    assert sorted((p.assistant, p.agreement) for p in pairs) == [
        ("helpdesk", "agree_happy"),
        ("helpdesk", "agree_unhappy"),
        ("helpdesk", "judge_blind"),
        ("helpdesk", "user_neutral"),
    ]
    assert records.pair_feedback() == []  # once
    shown = {r["outcome_id"]: r["agreement"] for r in records.for_turn("good")}
    assert shown == {
        "f-good-down": "judge_blind",
        "f-good-up": "agree_happy",
        "f-neutral": "user_neutral",
    }
