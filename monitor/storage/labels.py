"""SQL for human labels: the sampling frame of a labelling batch, batches and their items,
and the labels people gave (tables ``label_batches``, ``label_batch_items``, ``human_labels``).

The frame is every turn of an assistant whose newest verdict is ``ok``, in a time range, with
the judge's bands: a batch is a uniform sample of it, and the prediction-powered estimate
(monitor/stats/ppi.py) uses the frame's judge bands as the unlabelled set.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from monitor.schema.turn import METRICS, TurnSignals
from monitor.storage.retained_turns import judged_for_feedback
from monitor.storage.store import Store
from monitor.storage.tables import (
    human_labels,
    judgments,
    label_batch_items,
    label_batches,
    turns,
    verdicts,
)

_STREAM_ROWS = 2_000


@dataclass(frozen=True)
class FrameRow:
    event_id: str
    bands: dict[str, str]  # {metric: band, "turn_band": band}
    # The probability the cascade drew the turn for the judge (None: drawn uniformly).
    judge_inclusion: float | None = None


def _newest_ok() -> sa.ColumnElement[bool]:
    newer = sa.alias(verdicts, "newer")
    superseded = (
        sa.select(newer.c.id)
        .where(newer.c.event_id == verdicts.c.event_id, newer.c.id > verdicts.c.id)
        .exists()
    )
    return sa.and_(~superseded, verdicts.c.status == "ok")


def newest_ok_verdict() -> sa.ColumnElement[bool]:
    """A verdict row that is its turn's newest and ok (for queries joining ``verdicts``)."""
    return _newest_ok()


# A batch of turns picked for what the judge said (the review queue's severe turns): labels
# for agreement, never a sample for the estimates, which need each turn's drawing probability.
TARGETED = "targeted"


def judged_frame(
    store: Store,
    assistant: str,
    since: datetime | None = None,
    until: datetime | None = None,
) -> Iterator[FrameRow]:
    """The assistant's scored turns (newest verdict ok) in [since, until), by event id: the
    random sample's, without the turns judged because a user complained."""
    query = (
        sa.select(
            turns.c.event_id,
            verdicts.c.turn_band,
            verdicts.c.metric_bands,
            turns.c.inclusion_probability,
        )
        .select_from(turns.join(verdicts, verdicts.c.event_id == turns.c.event_id))
        .where(
            turns.c.assistant_name == assistant,
            _newest_ok(),
            ~judged_for_feedback(turns.c.event_id),
        )
        .order_by(turns.c.event_id)
    )
    if since is not None:
        query = query.where(turns.c.event_timestamp >= since)
    if until is not None:
        query = query.where(turns.c.event_timestamp < until)
    with store.transaction(write=False) as conn:
        result = conn.execution_options(stream_results=True, yield_per=_STREAM_ROWS).execute(query)
        for event_id, turn_band, metric_bands, judge_inclusion in result:
            bands = {m: str(b) for m, b in (metric_bands or {}).items() if m in METRICS}
            bands["turn_band"] = str(turn_band)
            drawn = None if judge_inclusion is None else float(judge_inclusion)
            yield FrameRow(str(event_id), bands, drawn)


def turn_events(store: Store, event_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The stored event documents of these turns."""
    out: dict[str, dict[str, Any]] = {}
    with store.transaction(write=False) as conn:
        for start in range(0, len(event_ids), 500):
            chunk = list(event_ids[start : start + 500])
            for event_id, event in conn.execute(
                sa.select(turns.c.event_id, turns.c.event).where(turns.c.event_id.in_(chunk))
            ):
                out[str(event_id)] = dict(event)
    return out


def create_batch(
    store: Store,
    batch: Mapping[str, Any],
    items: Sequence[FrameRow],
    probabilities: Sequence[float] | None = None,
) -> None:
    """``probabilities``: each item's probability of being drawn (None: uniform, recorded as
    size / population)."""
    if probabilities is None:
        share = float(batch["size"]) / max(1, int(batch["population"]))
        probabilities = [share] * len(items)
    with store.transaction(write=True) as conn:
        conn.execute(sa.insert(label_batches), [dict(batch)])
        if items:
            conn.execute(
                sa.insert(label_batch_items),
                [
                    {
                        "batch_id": batch["id"],
                        "event_id": r.event_id,
                        "position": i,
                        "judge_bands": r.bands,
                        "inclusion_probability": p,
                    }
                    for i, (r, p) in enumerate(zip(items, probabilities, strict=True))
                ],
            )


def batch(store: Store, batch_id: str) -> dict[str, Any] | None:
    with store.transaction(write=False) as conn:
        row = conn.execute(sa.select(label_batches).where(label_batches.c.id == batch_id)).first()
    return dict(row._mapping) if row is not None else None


def batches(store: Store, assistant: str | None = None) -> list[dict[str, Any]]:
    query = sa.select(label_batches).order_by(label_batches.c.created_at, label_batches.c.id)
    if assistant is not None:
        query = query.where(label_batches.c.assistant == assistant)
    with store.transaction(write=False) as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def batch_items(store: Store, batch_ids: Sequence[str]) -> dict[tuple[str, str], dict[str, str]]:
    """(batch id, event id) -> the judge's bands when drawn."""
    query = sa.select(
        label_batch_items.c.batch_id, label_batch_items.c.event_id, label_batch_items.c.judge_bands
    ).where(label_batch_items.c.batch_id.in_(list(batch_ids)))
    with store.transaction(write=False) as conn:
        return {(str(b), str(e)): dict(bands) for b, e, bands in conn.execute(query)}


def save_labels(store: Store, rows: Sequence[Mapping[str, Any]]) -> int:
    """Insert labels in one transaction; a label already given (same batch, event, metric and
    labeller) is replaced, so importing a corrected file again is safe."""
    if not rows:
        return 0
    stmt = store.upsert(
        human_labels,
        ["batch_id", "event_id", "metric", "labeller"],
        ["band", "labelled_at", "imported_at"],
    )
    with store.transaction(write=True) as conn:
        conn.execute(stmt, [dict(r) for r in rows])
    return len(rows)


def stored_labels(store: Store, batch_ids: Sequence[str]) -> list[dict[str, Any]]:
    query = (
        sa.select(
            human_labels.c.batch_id,
            human_labels.c.event_id,
            human_labels.c.metric,
            human_labels.c.band,
            human_labels.c.labeller,
            human_labels.c.labelled_at,
        )
        .where(human_labels.c.batch_id.in_(list(batch_ids)))
        .order_by(human_labels.c.id)
    )
    with store.transaction(write=False) as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def item_probabilities(
    store: Store, batch_ids: Sequence[str]
) -> dict[tuple[str, str], float | None]:
    """(batch id, event id) -> the probability the turn had of being drawn (None: a uniform
    batch drawn before probabilities were recorded; it is size / population)."""
    query = sa.select(
        label_batch_items.c.batch_id,
        label_batch_items.c.event_id,
        label_batch_items.c.inclusion_probability,
    ).where(label_batch_items.c.batch_id.in_(list(batch_ids)))
    with store.transaction(write=False) as conn:
        return {(str(b), str(e)): p for b, e, p in conn.execute(query)}


def turn_signals(store: Store, event_ids: Sequence[str]) -> dict[str, TurnSignals]:
    out: dict[str, TurnSignals] = {}
    with store.transaction(write=False) as conn:
        for start in range(0, len(event_ids), 500):
            chunk = list(event_ids[start : start + 500])
            rows = conn.execute(
                sa.select(
                    verdicts.c.id,
                    verdicts.c.event_id,
                    verdicts.c.s_final,
                    verdicts.c.metric_scores,
                    verdicts.c.arbitration_trigger,
                ).where(verdicts.c.event_id.in_(chunk), _newest_ok())
            ).all()
            by_verdict = {int(r.id): str(r.event_id) for r in rows}
            found: dict[int, list[tuple[str, dict[str, float]]]] = {v: [] for v in by_verdict}
            for verdict_id, kind, scores in conn.execute(
                sa.select(judgments.c.verdict_id, judgments.c.kind, judgments.c.scores).where(
                    judgments.c.verdict_id.in_(list(by_verdict)), judgments.c.status == "ok"
                )
            ):
                if scores:
                    found[int(verdict_id)].append(
                        (str(kind), {m: float(v["score"]) for m, v in scores.items()})
                    )
            for r in rows:
                out[str(r.event_id)] = TurnSignals(
                    None if r.s_final is None else float(r.s_final),
                    {m: float(v) for m, v in (r.metric_scores or {}).items()},
                    r.arbitration_trigger,
                    found[int(r.id)],
                )
    return out
