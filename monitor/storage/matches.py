"""SQL of the baseline-tier job (DICE): pairwise match rows, and recent stored turns.

Rows are built by the job (``monitor.jobs.baseline_tiers``): this module only writes and
reads them, so storage knows nothing of judging.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
import structlog

from monitor.schema.turn import TurnEvent
from monitor.storage.refusals import write_isolating
from monitor.storage.store import Store
from monitor.storage.tables import matches, turns

log = structlog.get_logger(__name__)


def insert_matches(store: Store, rows: Sequence[Mapping[str, Any]]) -> int:
    """Insert match rows in one transaction; returns how many were written.

    A row the database refuses (an assistant answer with a NUL character on PostgreSQL...) is
    isolated, logged with its probe and left out; the run's other rows are written.
    """
    if not rows:
        return 0

    def write(part: Sequence[Mapping[str, Any]]) -> int:
        with store.transaction(write=True) as conn:
            conn.execute(sa.insert(matches), [dict(r) for r in part])
        return len(part)

    written, refused = write_isolating(rows, write)
    for bad in refused:
        log.error(
            "match row refused by the database; left out",
            assistant=bad.item.get("assistant"),
            tier=bad.item.get("opponent"),
            probe_id=bad.item.get("probe_id"),
            error=bad.message,
        )
    return sum(written)


def run_matches(store: Store, run_id: str) -> list[dict[str, Any]]:
    """The rows of one run, in insertion order."""
    with store.transaction(write=False) as conn:
        result = conn.execute(
            sa.select(matches).where(matches.c.run_id == run_id).order_by(matches.c.id)
        )
        return [dict(row._mapping) for row in result]


def recent_turns(
    store: Store, assistant: str, since: datetime, limit: int = 1000
) -> list[TurnEvent]:
    """The assistant's stored turns with an event timestamp at or after ``since``, newest
    first, at most ``limit`` (rows that no longer validate are skipped, not fatal)."""
    query = (
        sa.select(turns.c.event)
        .where(turns.c.assistant_name == assistant, turns.c.event_timestamp >= since)
        .order_by(turns.c.event_timestamp.desc())
        .limit(limit)
    )
    with store.transaction(write=False) as conn:
        docs = [row.event for row in conn.execute(query)]
    events = []
    for doc in docs:
        try:
            events.append(TurnEvent.model_validate(doc))
        except ValueError:
            continue
    return events


__all__ = ["insert_matches", "recent_turns", "run_matches"]
