"""Rubric gradings of stored turns in SQL (the ``rubric`` job's reads and writes).

Candidates are stored turns (every stored turn was sampled and judged) in a time window that
have no grading yet under the grader configuration, oldest first, paged by a
``(stored_at, event_id)`` cursor so a batch stored in one transaction (one ``stored_at``) is
never split and skipped. Writes are idempotent on ``(event_id, entry_id, grader)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
import structlog

from monitor.errors import UnstorableRow, truncate
from monitor.storage.store import Store
from monitor.storage.tables import rubric_gradings, turns


@dataclass(frozen=True)
class StoredTurn:
    event_id: str
    stored_at: datetime
    event: dict[str, Any]

    @property
    def cursor(self) -> tuple[datetime, str]:
        return (self.stored_at, self.event_id)


log = structlog.get_logger(__name__)
_MAX_REASON_CHARS = 500


class RubricGradings:
    def __init__(self, store: Store) -> None:
        self._store = store

    def ungraded(
        self,
        grader: str,
        since: datetime,
        after: tuple[datetime, str] | None,
        limit: int,
    ) -> list[StoredTurn]:
        """Turns stored at or after ``since`` (and after the cursor) with no grading by
        ``grader``, oldest first, at most ``limit``."""
        graded = sa.exists().where(
            rubric_gradings.c.event_id == turns.c.event_id, rubric_gradings.c.grader == grader
        )
        query = (
            sa.select(turns.c.event_id, turns.c.stored_at, turns.c.event)
            .where(turns.c.stored_at >= since, ~graded)
            .order_by(turns.c.stored_at, turns.c.event_id)
            .limit(limit)
        )
        if after is not None:
            at, event_id = after
            query = query.where(
                sa.or_(
                    turns.c.stored_at > at,
                    sa.and_(turns.c.stored_at == at, turns.c.event_id > event_id),
                )
            )
        with self._store.transaction(write=False) as conn:
            return [StoredTurn(r.event_id, r.stored_at, r.event) for r in conn.execute(query)]

    def save(self, row: dict[str, Any]) -> bool:
        """Insert one grading row; False if this (event, entry, grader) was graded before.

        A graded row the database refuses (an extracted answer with a NUL character on
        PostgreSQL...) is stored as a failed grading with reason ``unstorable: <why>`` and no
        grades, so the turn is not graded (and paid for) again on every run.
        """
        try:
            return self._insert(row)
        except UnstorableRow as exc:
            log.error(
                "rubric grading refused by the database; stored as failed",
                event_id=row.get("event_id"),
                entry_id=row.get("entry_id"),
                error=exc.detail,
            )
            failed = {
                **row,
                "status": "failed",
                "failure_reason": truncate(f"unstorable: {exc.detail}", _MAX_REASON_CHARS),
                "grades": None,
                "coverage": None,
            }
            return self._insert(failed)

    def _insert(self, row: dict[str, Any]) -> bool:
        stmt = self._store.upsert(rubric_gradings, ["event_id", "entry_id", "grader"], values=row)
        with self._store.transaction(write=True) as conn:
            return bool(conn.execute(stmt).rowcount)

    def for_event(self, event_id: str) -> list[dict[str, Any]]:
        query = (
            sa.select(rubric_gradings)
            .where(rubric_gradings.c.event_id == event_id)
            .order_by(rubric_gradings.c.id)
        )
        with self._store.transaction(write=False) as conn:
            return [dict(r._mapping) for r in conn.execute(query)]


__all__ = ["RubricGradings", "StoredTurn"]
