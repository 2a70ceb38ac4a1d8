"""Turns judged because a user complained (sampling reason ``feedback``) are not of the random
sample: the drift windows, the detectors' reference baselines and the labels frame (the label
export's population and the label-corrected estimate's) read the same with or without them, on
SQLite and PostgreSQL, their mark outlives the kept turns' pruning while the turn is stored, and
the verdict and its mark are written in one transaction (a failure between leaves neither)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa

from monitor.schema.turn import METRICS
from monitor.storage import detection_queries, drift_queries, labels
from monitor.storage import retained_turns as kept_turns
from monitor.storage.retained_turns import RetainedTurns
from monitor.storage.store import Store
from monitor.storage.tables import judgments, retained_turns, turns, verdicts
from tests.fixtures.databases import make_turn, make_verdict

START = datetime(2026, 3, 1, tzinfo=UTC)
END = datetime(2026, 3, 2, tzinfo=UTC)


def _figures(store: Store) -> dict[str, Any]:
    return {
        "drift": list(drift_queries.window_samples(store, "helpdesk", START, END, ["channel"])),
        "reference": detection_queries.reference_counts(store, START, END, list(METRICS)),
        "frame": list(labels.judged_frame(store, "helpdesk", START, END)),
    }


def _judge_for_feedback(store: Store, records: RetainedTurns, event_id: str) -> None:
    turn = make_turn(event_id)
    with store.transaction(write=True) as conn:
        conn.execute(
            retained_turns.insert().values(
                event_id=event_id,
                conversation_id=turn.conversation_id,
                assistant_name="helpdesk",
                event=turn.model_dump_json(),
                retained_at=START,
            )
        )
    verdict = make_verdict(turn, failed=event_id.endswith("failed"))
    records.save_feedback_verdict(turn, verdict)


def test_feedback_judged_turns_leave_the_random_samples_figures_unchanged(store: Store) -> None:
    for event_id in ("r-1", "r-2", "r-3"):
        turn = make_turn(event_id)
        store.save(turn, make_verdict(turn, failed=event_id == "r-3"))
    sample = _figures(store)
    assert len(sample["drift"]) == 3
    assert sample["reference"]["helpdesk"].turns == 2
    assert [row.event_id for row in sample["frame"]] == ["r-1", "r-2"]

    records = RetainedTurns(store)
    for event_id in ("fb-1", "fb-2", "fb-failed"):
        _judge_for_feedback(store, records, event_id)
    with store.transaction(write=False) as conn:
        assert conn.scalar(sa.select(sa.func.count()).select_from(turns)) == 6
    assert _figures(store) == sample

    # Pruning by age and count forgets waiting kept turns, not the marks of stored turns.
    assert records.prune(0.0, 0) == 0
    assert _figures(store) == sample

    # Once retention deleted the turn, its mark goes with the next pruning.
    with store.transaction(write=True) as conn:
        fb_1 = sa.select(verdicts.c.id).where(verdicts.c.event_id == "fb-1")
        conn.execute(sa.delete(judgments).where(judgments.c.verdict_id.in_(fb_1)))
        conn.execute(sa.delete(verdicts).where(verdicts.c.event_id == "fb-1"))
        conn.execute(sa.delete(turns).where(turns.c.event_id == "fb-1"))
    assert records.prune(0.0, 0) == 1
    assert _figures(store) == sample


def _seen(store: Store, event_id: str) -> tuple[int, bool]:
    """(verdicts of the turn, whether its kept row is marked judged)."""
    with store.transaction(write=False) as conn:
        n = conn.scalar(
            sa.select(sa.func.count()).select_from(verdicts).where(verdicts.c.event_id == event_id)
        )
        mark = conn.scalar(
            sa.select(retained_turns.c.feedback_judged_at).where(
                retained_turns.c.event_id == event_id
            )
        )
    return int(n or 0), mark is not None


def test_the_feedback_verdict_and_its_mark_are_never_seen_apart(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = RetainedTurns(store)
    turn = make_turn("fb-torn")
    with store.transaction(write=True) as conn:
        conn.execute(
            retained_turns.insert().values(
                event_id=turn.event_id,
                conversation_id=turn.conversation_id,
                assistant_name="helpdesk",
                event=turn.model_dump_json(),
                retained_at=START,
            )
        )
    verdict = make_verdict(turn)
    real = kept_turns.mark_judged

    def marked_then_fails(conn: Any, event_id: str, config_hash: str, now: datetime) -> None:
        real(conn, event_id, config_hash, now)  # the verdict and the mark written, not committed
        raise RuntimeError("injected between the mark and the commit")

    monkeypatch.setattr(kept_turns, "mark_judged", marked_then_fails)
    with pytest.raises(RuntimeError, match="injected"):
        records.save_feedback_verdict(turn, verdict)
    assert _seen(store, turn.event_id) == (0, False)  # neither
    assert detection_queries.read_new(store, list(METRICS)) == []

    monkeypatch.setattr(kept_turns, "mark_judged", real)
    records.save_feedback_verdict(turn, verdict)
    assert _seen(store, turn.event_id) == (1, True)  # both
    assert detection_queries.read_new(store, list(METRICS)) == []  # observed with it
