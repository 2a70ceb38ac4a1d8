"""Retention: rows stored longer ago than ``storage.retention_days`` are deleted.

Every table that grows with traffic is covered: verdicts (their judgments go by ON DELETE
CASCADE), turns no verdict refers to any more (their rubric gradings go with them), pairwise
matches. Drift results are pruned by the drift job itself. Deletes go in batches, each its own
transaction, so a large purge never holds the write lock (SQLite) or a huge snapshot
(PostgreSQL) for long.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from monitor.storage.store import Store
from monitor.storage.tables import matches, turns, verdicts

_PURGE_BATCH = 5_000


def purge_older_than(store: Store, cutoff: datetime) -> int:
    """Delete what was stored before ``cutoff``; returns the verdicts deleted."""
    old_verdicts = sa.select(verdicts.c.id).where(verdicts.c.stored_at < cutoff).limit(_PURGE_BATCH)
    orphan_turns = (
        sa.select(turns.c.event_id)
        .where(turns.c.stored_at < cutoff)
        .where(~sa.exists().where(verdicts.c.event_id == turns.c.event_id))
        .limit(_PURGE_BATCH)
    )
    old_matches = sa.select(matches.c.id).where(matches.c.created_at < cutoff).limit(_PURGE_BATCH)
    deleted = _in_batches(
        store, sa.delete(verdicts).where(verdicts.c.id.in_(old_verdicts.scalar_subquery()))
    )
    _in_batches(store, sa.delete(turns).where(turns.c.event_id.in_(orphan_turns.scalar_subquery())))
    _in_batches(store, sa.delete(matches).where(matches.c.id.in_(old_matches.scalar_subquery())))
    return deleted


def _in_batches(store: Store, delete: sa.Delete) -> int:
    """Run ``delete`` (limited to one batch by its subquery) until a batch comes back short."""
    total = 0
    while True:
        with store.transaction(write=True, action="purging old rows") as conn:
            n = conn.execute(delete).rowcount
        total += n
        if n < _PURGE_BATCH:
            return total


__all__ = ["purge_older_than"]
