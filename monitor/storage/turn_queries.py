"""Read queries behind ``casewatch inspect``: judged turns, newest first, and one turn in full.

Each turn is shown with its newest verdict (the current judge configuration's, after a change),
found with the same anti-join as drift (``drift_queries``). Justifications live in
``judgments.scores`` ({metric: {score, justification}}), one document per judge; the listing
fetches them for the page of verdicts it shows only, in one extra query.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from monitor.schema.turn import METRICS, Band
from monitor.storage.store import Store
from monitor.storage.tables import judgments, turns, verdicts

_IN_CHUNK = 500


@dataclass(frozen=True)
class MetricLine:
    """One metric of a listed turn: its final band and score, and the worst judge's reason."""

    metric: str
    band: str
    score: float
    justification: str  # of the judge that scored this metric lowest ("" if none did)


@dataclass(frozen=True)
class TurnSummary:
    event_timestamp: datetime
    event_id: str
    assistant: str
    status: str
    turn_band: str | None
    s_final: float | None
    failure_reason: str | None
    worst: tuple[MetricLine, ...]


@dataclass(frozen=True)
class TurnDetail:
    event_id: str
    assistant: str
    event_timestamp: datetime
    stored_at: datetime
    event: dict[str, Any]
    verdict: dict[str, Any] | None
    judgments: list[dict[str, Any]] = field(default_factory=list)
    older_verdicts: int = 0  # verdicts of earlier judge configurations, not shown
    trace_id: str | None = None  # the evaluated span, for turns read from OpenTelemetry
    span_id: str | None = None


def _newest_verdict() -> sa.ColumnElement[bool]:
    newer = sa.alias(verdicts, "newer")
    return ~(
        sa.select(newer.c.id)
        .where(newer.c.event_id == verdicts.c.event_id, newer.c.id > verdicts.c.id)
        .exists()
    )


def assistants(store: Store) -> list[str]:
    query = sa.select(turns.c.assistant_name).distinct().order_by(turns.c.assistant_name)
    with store.transaction(write=False) as conn:
        return [str(a) for a in conn.scalars(query)]


def count_verdicts(store: Store) -> int:
    with store.transaction(write=False) as conn:
        return int(conn.scalar(sa.select(sa.func.count()).select_from(verdicts)) or 0)


def _worst_lines(
    metric_bands: dict[str, str],
    metric_scores: dict[str, float],
    reasons: dict[str, str],
    first: str | None,
    keep: int,
) -> tuple[MetricLine, ...]:
    lines = [
        MetricLine(m, metric_bands[m], float(metric_scores.get(m, 0.0)), reasons.get(m, ""))
        for m in METRICS
        if m in metric_bands
    ]
    # Worst band first, lowest score within it; the metric asked for always leads.
    lines.sort(key=lambda x: (x.metric != first, Band(x.band).rank, x.score, x.metric))
    shown = [x for x in lines if x.metric == first or x.band != Band.NONE.value]
    return tuple(shown[:keep])


def _lowest_reasons(docs: Sequence[dict[str, Any] | None]) -> dict[str, str]:
    """metric -> justification of the judge that scored it lowest."""
    best: dict[str, tuple[float, str]] = {}
    for doc in docs:
        for metric, entry in (doc or {}).items():
            if not isinstance(entry, dict):
                continue
            score = float(entry.get("score", 1.0))
            if metric not in best or score < best[metric][0]:
                best[metric] = (score, str(entry.get("justification", "")))
    return {m: reason for m, (_, reason) in best.items()}


def list_turns(
    store: Store,
    *,
    assistant: str | None = None,
    metric: str | None = None,
    band: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 20,
    worst: int = 3,
) -> list[TurnSummary]:
    """Judged turns (newest verdict each), newest event first.

    ``band`` filters the band of ``metric`` when one is given, else the turn band. Times are on
    the event's own timestamp, like drift and the alerts' windows.
    """
    query = (
        sa.select(
            turns.c.event_timestamp,
            turns.c.event_id,
            turns.c.assistant_name,
            verdicts.c.id,
            verdicts.c.status,
            verdicts.c.turn_band,
            verdicts.c.s_final,
            verdicts.c.failure_reason,
            verdicts.c.metric_bands,
            verdicts.c.metric_scores,
        )
        .select_from(turns.join(verdicts, verdicts.c.event_id == turns.c.event_id))
        .where(_newest_verdict())
        .order_by(turns.c.event_timestamp.desc(), turns.c.event_id)
        .limit(limit)
    )
    if assistant is not None:
        query = query.where(turns.c.assistant_name == assistant)
    if since is not None:
        query = query.where(turns.c.event_timestamp >= since)
    if until is not None:
        query = query.where(turns.c.event_timestamp < until)
    if band is not None:
        if metric is not None:
            query = query.where(verdicts.c.metric_bands[metric].as_string() == band)
        else:
            query = query.where(verdicts.c.turn_band == band)
    with store.transaction(write=False) as conn:
        rows = [r._mapping for r in conn.execute(query)]
        ids = [int(r["id"]) for r in rows]
        docs: dict[int, list[dict[str, Any] | None]] = {i: [] for i in ids}
        for start in range(0, len(ids), _IN_CHUNK):
            chunk = ids[start : start + _IN_CHUNK]
            found = conn.execute(
                sa.select(judgments.c.verdict_id, judgments.c.scores)
                .where(judgments.c.verdict_id.in_(chunk))
                .order_by(judgments.c.id)
            )
            for vid, scores in found:
                docs[int(vid)].append(scores)
    return [
        TurnSummary(
            event_timestamp=r["event_timestamp"],
            event_id=str(r["event_id"]),
            assistant=str(r["assistant_name"]),
            status=str(r["status"]),
            turn_band=r["turn_band"],
            s_final=r["s_final"],
            failure_reason=r["failure_reason"],
            worst=_worst_lines(
                dict(r["metric_bands"] or {}),
                dict(r["metric_scores"] or {}),
                _lowest_reasons(docs[int(r["id"])]),
                metric,
                worst,
            ),
        )
        for r in rows
    ]


_JUDGMENT_COLUMNS = (
    "judge",
    "kind",
    "model",
    "role",
    "status",
    "failure_reason",
    "failure_detail",
    "scores",
    "prompt_version",
    "prompt_hash",
    "attempts",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "latency_seconds",
)
_VERDICT_COLUMNS = (
    "judge_config_hash",
    "status",
    "failure_reason",
    "weight_profile",
    "s_final",
    "final_band",
    "turn_band",
    "metric_scores",
    "metric_bands",
    "arbitrated",
    "arbitration_trigger",
    "stored_at",
)


def get_turn(store: Store, event_id: str) -> TurnDetail | None:
    """One stored turn with its newest verdict and that verdict's judgments (None: unknown)."""
    with store.transaction(write=False) as conn:
        turn = conn.execute(sa.select(turns).where(turns.c.event_id == event_id)).first()
        if turn is None:
            return None
        found = conn.execute(
            sa.select(verdicts).where(verdicts.c.event_id == event_id).order_by(verdicts.c.id)
        ).all()
        verdict = found[-1]._mapping if found else None
        judged: list[dict[str, Any]] = []
        if verdict is not None:
            judged = [
                {c: r._mapping[c] for c in _JUDGMENT_COLUMNS}
                for r in conn.execute(
                    sa.select(judgments)
                    .where(judgments.c.verdict_id == verdict["id"])
                    .order_by(judgments.c.id)
                )
            ]
    t = turn._mapping
    return TurnDetail(
        event_id=str(t["event_id"]),
        assistant=str(t["assistant_name"]),
        event_timestamp=t["event_timestamp"],
        stored_at=t["stored_at"],
        event=dict(t["event"]),
        verdict={c: verdict[c] for c in _VERDICT_COLUMNS} if verdict is not None else None,
        judgments=judged,
        older_verdicts=max(len(found) - 1, 0),
        trace_id=t["trace_id"],
        span_id=t["span_id"],
    )
