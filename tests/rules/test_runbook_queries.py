"""The runbook's SQL (rules/RUNBOOK.md, ```sql blocks) runs on SQLite and PostgreSQL against the
``turn_verdicts`` view of a store holding the alert's kind of turns, and returns rows."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import sqlalchemy as sa

from monitor.storage.store import Store
from monitor.storage.turn_queries import list_turns
from tests.fixtures.turns import T0, seed_turn

RUNBOOK = Path(__file__).resolve().parents[2] / "rules" / "RUNBOOK.md"
ASSISTANT = "acme-support-canary"  # the name the runbook's examples use


def runbook_sql() -> list[str]:
    return re.findall(r"```sql\n(.*?)```", RUNBOOK.read_text(), flags=re.DOTALL)


def _seed(store: Store) -> None:
    seed_turn(store, "ok", assistant=ASSISTANT, at=T0)
    seed_turn(store, "bad-old", assistant=ASSISTANT, at=T0 + timedelta(minutes=1),
              scores={"hallucination": 0.1})  # fmt: skip
    seed_turn(store, "bad", assistant=ASSISTANT, at=T0 + timedelta(minutes=2),
              scores={"identifier_integrity": 0.05},
              second={"identifier_integrity": 0.2})  # fmt: skip
    seed_turn(store, "failed", assistant=ASSISTANT, at=T0 + timedelta(minutes=3), failed=True)
    # A re-judge under a new configuration: the view shows only the newest verdict.
    seed_turn(store, "bad-old", assistant=ASSISTANT, at=T0 + timedelta(minutes=1),
              scores={"hallucination": 0.05}, config_hash="cfg-b")  # fmt: skip


def test_the_runbook_has_queries_for_the_view() -> None:
    queries = runbook_sql()
    assert len(queries) >= 3
    assert all("FROM turn_verdicts" in q for q in queries)


def test_every_runbook_query_returns_rows_on_both_databases(store: Store) -> None:
    _seed(store)
    with store.transaction(write=False) as conn:
        results = [conn.execute(sa.text(q)).mappings().all() for q in runbook_sql()]
    severe, by_metric, failed = results
    assert [r["event_id"] for r in severe] == ["bad", "bad-old"]
    assert severe[0]["band_identifier_integrity"] == "severe"
    assert severe[0]["why_identifier_integrity"].startswith("a on identifier_integrity: the answer")
    assert severe[1]["why_hallucination"].startswith("a on hallucination: the answer cites")
    (counts,) = by_metric
    assert dict(counts) == {
        "judged": 3, "severe_turns": 2, "hallucination": 1, "retrieval": 0,
        "identifiers": 1, "resolution": 0,
    }  # fmt: skip
    assert [(r["event_id"], r["failure_reason"]) for r in failed] == [("failed", "invalid_output")]


def test_the_view_agrees_with_inspect(store: Store) -> None:
    _seed(store)
    with store.transaction(write=False) as conn:
        rows = conn.execute(
            sa.text(
                "SELECT event_id, turn_band, s_final FROM turn_verdicts ORDER BY event_time DESC"
            )
        ).all()
    listed = list_turns(store, limit=100)
    assert [(r.event_id, r.turn_band) for r in rows] == [(s.event_id, s.turn_band) for s in listed]
    assert [r.s_final for r in rows] == [s.s_final for s in listed]
