"""Rows the scheduled jobs write, when the database refuses one of them.

A match row or a rubric grading the database cannot hold must not fail the job's run forever
(each run paying the judge again for the same rows): the refused row is isolated, the others
are written, and a refused grading is recorded as failed so it is not graded again.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa

from monitor.judging.rubric_prompt import PARSE_PATHS
from monitor.storage.matches import insert_matches
from monitor.storage.rubric_gradings import RubricGradings
from monitor.storage.store import Store
from monitor.storage.tables import matches
from tests.fixtures.databases import make_turn, make_verdict

NOW = datetime(2026, 11, 25, 12, tzinfo=UTC)
# Refused by both backends: a date the driver cannot encode once shifted to UTC.
_FAR = datetime.fromisoformat("9999-12-31T23:59:59-05:00")


def _bad_text(store: Store) -> dict[str, Any]:
    """What makes a row unstorable on this backend: a NUL on PostgreSQL, a date elsewhere."""
    return {"nul": True} if store.dialect == "postgresql" else {"far": True}


def _match(i: int, *, nul: bool = False, far: bool = False) -> dict[str, Any]:
    return {
        "run_id": "run-1",
        "assistant": "helpdesk",
        "opponent": "high",
        "probe_id": f"p{i}",
        "source": "endpoint",
        "event_id": None,
        "answer": "answer\x00junk" if nul else f"answer {i}",
        "judge": "heuristic",
        "model": "m",
        "prompt_version": "v1",
        "status": "ok",
        "failure_reason": None,
        "score": 0.5,
        "outcome": "tie",
        "disagreement": 0.0,
        "forward": {"decision": "Tie"},
        "swapped": None,
        "cost_usd": 0.0,
        "created_at": _FAR if far else NOW,
    }


def test_a_refused_match_row_is_left_out_and_the_run_is_written(store: Store) -> None:
    rows = [_match(i) for i in range(6)]
    rows.insert(3, _match(99, **_bad_text(store)))

    assert insert_matches(store, rows) == 6

    with store.transaction(write=False) as conn:
        probes = sorted(conn.scalars(sa.select(matches.c.probe_id)))
    assert probes == sorted(f"p{i}" for i in range(6))


def _grading(event_id: str, answer: str) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "entry_id": "entry-1",
        "grader": "grader-fp",
        "assistant_name": "helpdesk",
        "status": "ok",
        "failure_reason": None,
        "reviewed": True,
        "coverage": 1.0,
        "covered_grade": 4,
        "grades": [{"question": "q", "grade": 5, "answer": answer, "path": "p", "passage": 0}],
        "path_counts": {p: 0 for p in PARSE_PATHS},
        "passages": 1,
        "requests": 1,
        "input_tokens": 10,
        "output_tokens": 5,
        "cost_usd": 0.001,
        "graded_at": NOW,
    }


def test_a_refused_grading_is_stored_failed_so_it_is_not_graded_again(store: Store) -> None:
    if store.dialect == "sqlite":
        pytest.skip("SQLite stores any text and JSON: an extracted answer is never refused")
    turn = make_turn("evt-1")
    store.save(turn, make_verdict(turn))
    gradings = RubricGradings(store)
    row = _grading("evt-1", "extracted\x00answer")

    assert gradings.save(row) is True

    [stored] = gradings.for_event("evt-1")
    assert stored["status"] == "failed"
    assert stored["failure_reason"].startswith("unstorable: ")
    assert stored["grades"] is None
    # Graded once: the turn is no longer a candidate.
    assert gradings.ungraded("grader-fp", NOW.replace(year=2000), None, 10) == []
