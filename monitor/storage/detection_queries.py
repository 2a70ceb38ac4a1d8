"""SQL for the sequential detectors: new verdicts past a cursor, reference counts, state.

The cursor. PostgreSQL draws verdict ids from a sequence when a row is inserted, but rows become
visible when their transaction commits, so a verdict with a lower id (or an earlier
``stored_at``) can appear after a higher one has been read: neither "id > last id" nor
"stored_at > last time" is safe. The cursor is a position on ``stored_at`` plus the ids already
read in an *overlap* window before it. Each read takes every verdict with
``stored_at >= position - overlap``, skips the ids already read, and moves the position to the
newest ``stored_at`` read. ``stored_at`` is stamped by the writing replica just before its
transaction, so a verdict commits within (transaction time + clock skew) of its stamp; as long as
the overlap is longer than that, a late commit is still inside the re-read window when it becomes
visible (not skipped) and a verdict read once is in the seen set while it can be re-read (not
counted twice). State and cursor are written in one transaction with the detectors' statistics,
so a crash between the two cannot double-count either.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from monitor.storage.leases import Fence, require_lease
from monitor.storage.store import Store
from monitor.storage.tables import detector_cursor, detector_states, turns, verdicts

CURSOR_NAME = "verdicts"


@dataclass(frozen=True)
class Observation:
    """One verdict as the detectors read it (``ok`` False: judge_failed, not an observation)."""

    id: int
    stored_at: datetime
    assistant: str
    event_timestamp: datetime
    ok: bool
    turn_severe: bool
    severe_metrics: frozenset[str]


@dataclass
class Cursor:
    position: datetime | None = None
    seen: dict[int, float] = field(default_factory=dict)  # id -> stored_at (unix seconds)


@dataclass(frozen=True)
class ReferenceCounts:
    turns: int  # judged ok turns
    severe_turns: int
    severe_metrics: dict[str, int]
    first: datetime | None  # earliest event timestamp in the window
    last: datetime | None


@dataclass(frozen=True)
class LiveCounts:
    """Judged ok turns of one assistant stored in the rate window, and in the burst window."""

    turns: int
    first: datetime | None  # the earliest stored_at among them
    recent: int


def read_cursor(store: Store) -> Cursor:
    with store.transaction(write=False) as conn:
        row = conn.execute(
            sa.select(detector_cursor).where(detector_cursor.c.name == CURSOR_NAME)
        ).first()
    if row is None:
        return Cursor()
    seen = {int(k): float(v) for k, v in dict(row.seen).items()}
    return Cursor(row.position, seen)


def read_new(
    store: Store, cursor: Cursor, overlap_s: float, metrics: Sequence[str], *, start: datetime
) -> list[Observation]:
    """Verdicts not yet read, oldest first: ``stored_at >= position - overlap`` minus the ids
    in the seen set (``start`` stands for the position of a cursor that never moved)."""
    since = (cursor.position or start) - timedelta(seconds=overlap_s)
    bands = [
        verdicts.c.metric_bands[m].as_string().label(f"band_{i}") for i, m in enumerate(metrics)
    ]
    query = (
        sa.select(
            verdicts.c.id,
            verdicts.c.stored_at,
            verdicts.c.status,
            verdicts.c.turn_band,
            turns.c.assistant_name,
            turns.c.event_timestamp,
            *bands,
        )
        .select_from(verdicts.join(turns, turns.c.event_id == verdicts.c.event_id))
        .where(verdicts.c.stored_at >= since)
        .order_by(verdicts.c.stored_at, verdicts.c.id)
    )
    out = []
    with store.transaction(write=False) as conn:
        for r in conn.execute(query):
            if int(r.id) in cursor.seen:
                continue
            m = r._mapping
            ok = r.status == "ok"
            out.append(
                Observation(
                    id=int(r.id),
                    stored_at=r.stored_at,
                    assistant=str(r.assistant_name),
                    event_timestamp=r.event_timestamp,
                    ok=ok,
                    turn_severe=ok and r.turn_band == "severe",
                    severe_metrics=frozenset(
                        metric
                        for i, metric in enumerate(metrics)
                        if ok and m[f"band_{i}"] == "severe"
                    ),
                )
            )
    return out


def advance(cursor: Cursor, read: Iterable[Observation], overlap_s: float) -> Cursor:
    """The cursor after ``read``: the newest stored_at, and the ids still inside the overlap."""
    seen = dict(cursor.seen)
    position = cursor.position
    for o in read:
        seen[o.id] = o.stored_at.timestamp()
        if position is None or o.stored_at > position:
            position = o.stored_at
    if position is None:
        return Cursor(None, seen)
    horizon = position.timestamp() - overlap_s
    return Cursor(position, {i: t for i, t in seen.items() if t >= horizon})


def reference_counts(
    store: Store,
    start: datetime,
    end: datetime,
    metrics: Sequence[str],
    assistants: Collection[str] | None = None,
) -> dict[str, ReferenceCounts]:
    """Per assistant (of ``assistants``, None: all), judged ok turns (and severe ones, per
    metric) with an event timestamp in [start, end)."""
    severe = [
        sa.func.sum(
            sa.case((verdicts.c.metric_bands[m].as_string() == "severe", 1), else_=0)
        ).label(f"m_{i}")
        for i, m in enumerate(metrics)
    ]
    query = (
        sa.select(
            turns.c.assistant_name,
            sa.func.count().label("n"),
            sa.func.sum(sa.case((verdicts.c.turn_band == "severe", 1), else_=0)).label("x"),
            sa.func.min(turns.c.event_timestamp).label("first"),
            sa.func.max(turns.c.event_timestamp).label("last"),
            *severe,
        )
        .select_from(verdicts.join(turns, turns.c.event_id == verdicts.c.event_id))
        .where(
            turns.c.event_timestamp >= start,
            turns.c.event_timestamp < end,
            verdicts.c.status == "ok",
        )
        .group_by(turns.c.assistant_name)
    )
    if assistants is not None:
        query = query.where(turns.c.assistant_name.in_(sorted(assistants)))
    out = {}
    with store.transaction(write=False) as conn:
        for r in conn.execute(query):
            m = r._mapping
            out[str(r.assistant_name)] = ReferenceCounts(
                turns=int(m["n"]),
                severe_turns=int(m["x"] or 0),
                severe_metrics={metric: int(m[f"m_{i}"] or 0) for i, metric in enumerate(metrics)},
                first=m["first"],
                last=m["last"],
            )
    return out


def live_counts(store: Store, since: datetime, recent_since: datetime) -> dict[str, LiveCounts]:
    """Per assistant, judged ok turns stored since ``since`` (and since ``recent_since``): the
    rate the detectors are fed, whatever replica stored them."""
    query = (
        sa.select(
            turns.c.assistant_name,
            sa.func.count().label("n"),
            sa.func.min(verdicts.c.stored_at).label("first"),
            sa.func.sum(sa.case((verdicts.c.stored_at >= recent_since, 1), else_=0)).label("r"),
        )
        .select_from(verdicts.join(turns, turns.c.event_id == verdicts.c.event_id))
        .where(verdicts.c.stored_at >= since, verdicts.c.status == "ok")
        .group_by(turns.c.assistant_name)
    )
    with store.transaction(write=False) as conn:
        return {
            str(r.assistant_name): LiveCounts(int(r.n), r.first, int(r.r or 0))
            for r in conn.execute(query)
        }


def read_states(store: Store) -> list[dict[str, Any]]:
    with store.transaction(write=False) as conn:
        query = sa.select(detector_states).order_by(
            detector_states.c.assistant, detector_states.c.signal
        )
        return [dict(r._mapping) for r in conn.execute(query)]


def save(
    store: Store,
    states: Iterable[Mapping[str, Any]],
    cursor: Cursor,
    now: datetime,
    *,
    fence: Fence | None = None,
) -> None:
    """Upsert the detectors' rows and the cursor in one transaction; with a ``fence``, only
    while its owner holds the job's lease (``LeaseLost`` otherwise, nothing written)."""
    rows = [dict(s) for s in states]
    with store.transaction(write=True, action="saving the detectors' state") as conn:
        if fence is not None:
            require_lease(conn, fence.job, fence.owner, fence.at)
        if rows:
            keys = [c.name for c in detector_states.c if c.name not in ("assistant", "signal")]
            conn.execute(store.upsert(detector_states, ["assistant", "signal"], keys), rows)
        if cursor.position is not None:
            conn.execute(
                store.upsert(
                    detector_cursor,
                    ["name"],
                    ["position", "seen", "updated_at"],
                    values={
                        "name": CURSOR_NAME,
                        "position": cursor.position,
                        "seen": {str(k): v for k, v in cursor.seen.items()},
                        "updated_at": now,
                    },
                )
            )
