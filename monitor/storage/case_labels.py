"""SQL for case labels: the sampling frame of a case labelling batch (an assistant's scored
cases, which ``casewatch compare --cases`` also pairs), batches and their items, and the bands
people gave whole cases (tables ``case_label_batches``, ``case_label_items``,
``case_labels``).

The frame of an assistant's cases in [since, until) is, per conversation, its newest case
verdict judged before ``until`` (the verdict current at the frame's end), kept when it is ``ok``
and judged at or after ``since``. A resumed case judged later does not move the frame: a batch's
frame read again for its estimate is the one it was drawn from. The verdict's version and its
bands are recorded on each drawn item, so agreement compares people with what the judge said
then.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from monitor.schema.case import CASE_METRICS
from monitor.schema.turn import TurnEvent
from monitor.storage.store import Store
from monitor.storage.tables import (
    case_label_batches,
    case_label_items,
    case_labels,
    case_verdicts,
    turns,
)

CASE_BAND = "case_band"


@dataclass(frozen=True)
class CaseFrameRow:
    conversation_id: str
    version: int
    covered_until: datetime
    bands: dict[str, str]  # {case metric: band, "case_band": band}
    case_score: float | None = None
    metric_scores: dict[str, float] = field(default_factory=dict)
    outcome: str | None = None
    judge_config_hash: str = ""


def case_frame(
    store: Store,
    assistant: str,
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[CaseFrameRow]:
    """The assistant's scored cases in the frame (this module's docstring), by conversation."""
    newest = sa.select(
        case_verdicts.c.conversation_id.label("cid"),
        sa.func.max(case_verdicts.c.version).label("version"),
    ).where(case_verdicts.c.assistant_name == assistant)
    if until is not None:
        newest = newest.where(case_verdicts.c.judged_at < until)
    cur = newest.group_by(case_verdicts.c.conversation_id).subquery("cur")
    query = (
        sa.select(
            case_verdicts.c.conversation_id,
            case_verdicts.c.version,
            case_verdicts.c.covered_until,
            case_verdicts.c.case_band,
            case_verdicts.c.metric_bands,
            case_verdicts.c.case_score,
            case_verdicts.c.metric_scores,
            case_verdicts.c.resolution_outcome,
            case_verdicts.c.judge_config_hash,
        )
        .join(
            cur,
            sa.and_(
                cur.c.cid == case_verdicts.c.conversation_id,
                cur.c.version == case_verdicts.c.version,
            ),
        )
        .where(case_verdicts.c.assistant_name == assistant, case_verdicts.c.status == "ok")
        .order_by(case_verdicts.c.conversation_id)
    )
    if since is not None:
        query = query.where(case_verdicts.c.judged_at >= since)
    with store.transaction(write=False, action="reading the case frame") as conn:
        rows = conn.execute(query).all()
    out = []
    for r in rows:
        bands = {m: str(b) for m, b in (r.metric_bands or {}).items() if m in CASE_METRICS}
        bands[CASE_BAND] = str(r.case_band)
        out.append(
            CaseFrameRow(
                str(r.conversation_id),
                int(r.version),
                r.covered_until,
                bands,
                None if r.case_score is None else float(r.case_score),
                {m: float(v) for m, v in (r.metric_scores or {}).items() if m in CASE_METRICS},
                None if r.resolution_outcome is None else str(r.resolution_outcome),
                str(r.judge_config_hash),
            )
        )
    return out


def case_turn_events(
    store: Store, assistant: str, conversation_id: str, covered_until: datetime
) -> list[TurnEvent]:
    """The turns a case verdict covered (stored at or before ``covered_until``), in
    conversation order: what the labeller reads."""
    query = (
        sa.select(turns.c.event)
        .where(
            turns.c.assistant_name == assistant,
            turns.c.conversation_id == conversation_id,
            turns.c.stored_at <= covered_until,
        )
        .order_by(turns.c.turn_index, turns.c.event_timestamp, turns.c.stored_at)
    )
    with store.transaction(write=False, action="reading a case's turns") as conn:
        return [TurnEvent.model_validate(e) for (e,) in conn.execute(query)]


def create_case_batch(
    store: Store, batch: Mapping[str, Any], items: Sequence[CaseFrameRow]
) -> None:
    with store.transaction(write=True, action="recording a case labelling batch") as conn:
        conn.execute(sa.insert(case_label_batches), [dict(batch)])
        if items:
            conn.execute(
                sa.insert(case_label_items),
                [
                    {
                        "batch_id": batch["id"],
                        "conversation_id": r.conversation_id,
                        "version": r.version,
                        "position": i,
                        "judge_bands": r.bands,
                    }
                    for i, r in enumerate(items)
                ],
            )


def case_batch(store: Store, batch_id: str) -> dict[str, Any] | None:
    with store.transaction(write=False) as conn:
        row = conn.execute(
            sa.select(case_label_batches).where(case_label_batches.c.id == batch_id)
        ).first()
    return dict(row._mapping) if row is not None else None


def case_batches(store: Store, assistant: str | None = None) -> list[dict[str, Any]]:
    query = sa.select(case_label_batches).order_by(
        case_label_batches.c.created_at, case_label_batches.c.id
    )
    if assistant is not None:
        query = query.where(case_label_batches.c.assistant == assistant)
    with store.transaction(write=False) as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def case_batch_items(
    store: Store, batch_ids: Sequence[str]
) -> dict[tuple[str, str], dict[str, str]]:
    """(batch id, conversation id) -> the judge's bands when drawn."""
    query = sa.select(
        case_label_items.c.batch_id,
        case_label_items.c.conversation_id,
        case_label_items.c.judge_bands,
    ).where(case_label_items.c.batch_id.in_(list(batch_ids)))
    with store.transaction(write=False) as conn:
        return {(str(b), str(c)): dict(bands) for b, c, bands in conn.execute(query)}


def save_case_labels(store: Store, rows: Sequence[Mapping[str, Any]]) -> int:
    """Insert case labels in one transaction; a label already given (same batch, case, key and
    labeller) is replaced, so importing a corrected file again is safe."""
    if not rows:
        return 0
    stmt = store.upsert(
        case_labels,
        ["batch_id", "conversation_id", "metric", "labeller"],
        ["band", "labelled_at", "imported_at"],
    )
    with store.transaction(write=True, action="saving case labels") as conn:
        conn.execute(stmt, [dict(r) for r in rows])
    return len(rows)


def stored_case_labels(store: Store, batch_ids: Sequence[str]) -> list[dict[str, Any]]:
    query = (
        sa.select(
            case_labels.c.batch_id,
            case_labels.c.conversation_id,
            case_labels.c.metric,
            case_labels.c.band,
            case_labels.c.labeller,
            case_labels.c.labelled_at,
        )
        .where(case_labels.c.batch_id.in_(list(batch_ids)))
        .order_by(case_labels.c.id)
    )
    with store.transaction(write=False) as conn:
        return [dict(r._mapping) for r in conn.execute(query)]
