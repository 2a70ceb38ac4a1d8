"""SQL for the review queue (tables ``review_tasks``, ``review_annotations``): turns queued for
people in labelling batches, the annotation server's task each became, and the annotation
versions pulled back.

A turn is queued in a labelling batch (``label_batches``; its id starts with ``review-``):
``targeted`` for turns picked for what the judge said (severe), ``uncertain`` for a Poisson draw
with known inclusion probabilities. Its ``review_tasks`` row has no task id while it is in the
backlog; the push sets it. A pulled annotation version (its id and the server's ``updated_at``)
is recorded with what became of it, so a pull stores or refuses each version once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from monitor.storage.labels import FrameRow, newest_ok_verdict
from monitor.storage.store import Store
from monitor.storage.tables import (
    label_batch_items,
    label_batches,
    outcome_events,
    review_annotations,
    review_tasks,
    turns,
    verdicts,
)

BATCH_PREFIX = "review-"
# The judge against the users (outcome events paired with the newest verdict): the user was
# unhappy with a turn the judge passed, or happy with one it failed.
USER_DISAGREEMENTS = ("judge_blind", "judge_harsh")


@dataclass(frozen=True)
class QueuedTurn:
    batch_id: str
    event_id: str
    reason: str
    judge_bands: dict[str, str]
    inclusion_probability: float | None
    attempts: int


def severe_unqueued(store: Store, limit: int) -> list[tuple[str, FrameRow]]:
    """Up to ``limit`` (assistant, turn) whose newest verdict is ok and severe and that no
    review batch holds yet, newest turns first."""
    return _unqueued(store, verdicts.c.turn_band == "severe", limit)


def disputed_by_users_unqueued(store: Store, limit: int) -> list[tuple[str, FrameRow]]:
    """Up to ``limit`` (assistant, turn) whose newest verdict is ok, that a user's feedback
    disputes (``USER_DISAGREEMENTS``) and that no review batch holds yet, newest first."""
    disputed = sa.select(outcome_events.c.outcome_id).where(
        outcome_events.c.turn_event_id == turns.c.event_id,
        outcome_events.c.agreement.in_(USER_DISAGREEMENTS),
    )
    return _unqueued(store, disputed.exists(), limit)


def _unqueued(
    store: Store, condition: sa.ColumnElement[bool], limit: int
) -> list[tuple[str, FrameRow]]:
    if limit <= 0:
        return []
    queued = sa.select(review_tasks.c.event_id).where(review_tasks.c.event_id == turns.c.event_id)
    query = (
        sa.select(
            turns.c.assistant_name, turns.c.event_id, verdicts.c.turn_band, verdicts.c.metric_bands
        )
        .select_from(turns.join(verdicts, verdicts.c.event_id == turns.c.event_id))
        .where(newest_ok_verdict(), condition, ~queued.exists())
        .order_by(turns.c.event_timestamp.desc(), turns.c.event_id)
        .limit(limit)
    )
    with store.transaction(write=False) as conn:
        rows = conn.execute(query).all()
    out = []
    for assistant, event_id, turn_band, metric_bands in rows:
        bands = {m: str(b) for m, b in (metric_bands or {}).items()}
        bands["turn_band"] = str(turn_band)
        out.append((str(assistant), FrameRow(str(event_id), bands)))
    return out


def last_draw_end(store: Store, assistant: str) -> datetime | None:
    """Where the assistant's newest uncertainty draw of the review queue ended its frame."""
    query = sa.select(sa.func.max(label_batches.c.frame_end)).where(
        label_batches.c.assistant == assistant,
        label_batches.c.strategy == "uncertain",
        label_batches.c.id.startswith(BATCH_PREFIX),
    )
    with store.transaction(write=False) as conn:
        found = conn.execute(query).scalar()
    return found if isinstance(found, datetime) else None


def queue_batch(
    store: Store,
    batch: Mapping[str, Any],
    items: Sequence[FrameRow],
    probabilities: Sequence[float | None],
    reason: str,
    now: datetime,
) -> None:
    """A labelling batch and its turns in the backlog, in one transaction."""
    with store.transaction(write=True) as conn:
        conn.execute(sa.insert(label_batches), [dict(batch)])
        if not items:
            return
        conn.execute(
            sa.insert(label_batch_items),
            [
                {"batch_id": batch["id"], "event_id": r.event_id, "position": i,
                 "judge_bands": r.bands, "inclusion_probability": p}
                for i, (r, p) in enumerate(zip(items, probabilities, strict=True))
            ],
        )  # fmt: skip
        conn.execute(
            sa.insert(review_tasks),
            [
                {"batch_id": batch["id"], "event_id": r.event_id, "reason": reason,
                 "queued_at": now, "attempts": 0}
                for r in items
            ],
        )  # fmt: skip


def backlog(store: Store, limit: int) -> list[QueuedTurn]:
    """Queued turns with no task yet, oldest first."""
    query = (
        sa.select(
            review_tasks.c.batch_id,
            review_tasks.c.event_id,
            review_tasks.c.reason,
            review_tasks.c.attempts,
            label_batch_items.c.judge_bands,
            label_batch_items.c.inclusion_probability,
        )
        .select_from(
            review_tasks.join(
                label_batch_items,
                sa.and_(
                    label_batch_items.c.batch_id == review_tasks.c.batch_id,
                    label_batch_items.c.event_id == review_tasks.c.event_id,
                ),
            )
        )
        .where(review_tasks.c.task_id.is_(None))
        .order_by(review_tasks.c.queued_at, review_tasks.c.batch_id, label_batch_items.c.position)
        .limit(limit)
    )
    with store.transaction(write=False) as conn:
        return [
            QueuedTurn(str(b), str(e), str(r), dict(bands), p, int(a))
            for b, e, r, a, bands, p in conn.execute(query)
        ]


def backlog_size(store: Store) -> int:
    query = (
        sa.select(sa.func.count()).select_from(review_tasks).where(review_tasks.c.task_id.is_(None))
    )
    with store.transaction(write=False) as conn:
        return int(conn.execute(query).scalar() or 0)


def mark_pushed(
    store: Store, batch_id: str, event_id: str, project_id: int, task_id: int, now: datetime
) -> None:
    with store.transaction(write=True) as conn:
        conn.execute(
            sa.update(review_tasks)
            .where(review_tasks.c.batch_id == batch_id, review_tasks.c.event_id == event_id)
            .values(project_id=project_id, task_id=task_id, pushed_at=now, last_error=None)
        )


def mark_failed(store: Store, keys: Sequence[tuple[str, str]], error: str) -> None:
    """One more failed attempt at pushing each of these (batch, event)."""
    with store.transaction(write=True) as conn:
        for batch_id, event_id in keys:
            conn.execute(
                sa.update(review_tasks)
                .where(review_tasks.c.batch_id == batch_id, review_tasks.c.event_id == event_id)
                .values(attempts=review_tasks.c.attempts + 1, last_error=error[:1000])
            )


def pushed_tasks(store: Store, project_id: int) -> dict[int, tuple[str, str]]:
    """Task id -> (batch id, event id) of the turns pushed to this project."""
    query = sa.select(
        review_tasks.c.task_id, review_tasks.c.batch_id, review_tasks.c.event_id
    ).where(review_tasks.c.project_id == project_id, review_tasks.c.task_id.is_not(None))
    with store.transaction(write=False) as conn:
        return {int(t): (str(b), str(e)) for t, b, e in conn.execute(query)}


def pulled_versions(store: Store, project_id: int) -> dict[int, str]:
    """Annotation id -> the version last pulled."""
    query = sa.select(review_annotations.c.annotation_id, review_annotations.c.version).where(
        review_annotations.c.project_id == project_id
    )
    with store.transaction(write=False) as conn:
        return {int(a): str(v) for a, v in conn.execute(query)}


def record_pulled(store: Store, rows: Sequence[Mapping[str, Any]]) -> None:
    """Each annotation version pulled and its outcome (stored | refused, with the reason)."""
    if not rows:
        return
    stmt = store.upsert(
        review_annotations,
        ["project_id", "annotation_id"],
        ["task_id", "version", "outcome", "reason", "pulled_at"],
    )
    with store.transaction(write=True) as conn:
        conn.execute(stmt, [dict(r) for r in rows])


def assistants(store: Store) -> list[str]:
    """Every assistant with a stored turn."""
    query = sa.select(turns.c.assistant_name).distinct().order_by(turns.c.assistant_name)
    with store.transaction(write=False) as conn:
        return [str(a) for (a,) in conn.execute(query)]
