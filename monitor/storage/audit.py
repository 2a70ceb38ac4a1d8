"""Reads of the audit tables for tests, benchmarks and people checking a run by hand.

The daemon never calls these (its one read, ``Store.existing``, is on the hot path); they read
whole verdicts with their judgments, row counts and stored turns.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from monitor.storage.store import IN_CHUNK, Store
from monitor.storage.tables import AUDIT_TABLES, judgments, turns, verdicts


def counts(store: Store) -> dict[str, int]:
    """Rows per audit table (turns, verdicts, judgments)."""
    with store.transaction(write=False, action="counting rows") as conn:
        return {
            t.name: int(conn.scalar(sa.select(sa.func.count()).select_from(t)) or 0)
            for t in AUDIT_TABLES
        }


def has_verdict(store: Store, event_id: str, judge_config_hash: str) -> bool:
    return bool(store.existing([event_id], judge_config_hash))


def stored_event(store: Store, event_id: str) -> dict[str, Any] | None:
    """The turn event exactly as stored for audit (unknown producer fields included)."""
    query = sa.select(turns.c.event).where(turns.c.event_id == event_id)
    with store.transaction(write=False, action="reading a turn") as conn:
        doc: dict[str, Any] | None = conn.scalar(query)
    return doc


def stored_verdicts(
    store: Store, *, assistant: str | None = None, limit: int = 1000
) -> list[dict[str, Any]]:
    """Newest verdicts first, each with its turn's identity and its ``judgments`` list."""
    query = (
        sa.select(
            verdicts,
            turns.c.conversation_id,
            turns.c.turn_index,
            turns.c.assistant_name,
            turns.c.assistant_version,
            turns.c.assistant_model,
            turns.c.event_timestamp,
        )
        .join(turns, turns.c.event_id == verdicts.c.event_id)
        .order_by(verdicts.c.id.desc())
        .limit(limit)
    )
    if assistant is not None:
        query = query.where(turns.c.assistant_name == assistant)
    with store.transaction(write=False, action="reading verdicts") as conn:
        rows = [dict(r._mapping) for r in conn.execute(query)]
        by_id: dict[int, list[dict[str, Any]]] = {r["id"]: [] for r in rows}
        ids = list(by_id)
        for start in range(0, len(ids), IN_CHUNK):
            chunk = ids[start : start + IN_CHUNK]
            query_j = (
                sa.select(judgments)
                .where(judgments.c.verdict_id.in_(chunk))
                .order_by(judgments.c.id)
            )
            for j in conn.execute(query_j):
                by_id[j.verdict_id].append(dict(j._mapping))
    for row in rows:
        row["judgments"] = by_id[row["id"]]
    return rows


__all__ = ["counts", "has_verdict", "stored_event", "stored_verdicts"]
