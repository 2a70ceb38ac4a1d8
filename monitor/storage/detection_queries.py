"""SQL for the sequential detectors: verdicts not observed yet, reference counts, state.

Which verdicts the detectors have observed is kept on the verdicts themselves: ``observed_at``
is NULL until the detection job has fed a verdict to them, and is set in the transaction that
saves their state (``save``). A run reads every verdict still NULL, whenever it committed: a
writer whose commit lands long after it stamped ``stored_at`` (a slow store, a connection
pool wait, a lock, a replica's clock) is read by the next run, and a verdict marked observed is
never read again. No position in ``stored_at`` or in the ids is involved, so neither the order
in which concurrent writers commit nor any window's length can skip one or count one twice
(an earlier cursor, a ``stored_at`` position with a re-read window, missed what committed
after the window had passed).

Two runs saving from the same read (a run outside the scheduler beside a scheduled one, a
lease that moved mid-run) cannot both count: ``save`` marks only verdicts still NULL and bumps
the cursor's ``generation`` only from the generation its run read, and refuses the whole save
(``LeaseLost``, nothing written) when another run got there first; the next run reads again.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from monitor.stats.cell_cusum import stratum
from monitor.storage import detector_saves
from monitor.storage.detector_saves import (
    Cursor,
    LiveCounts,
    move_cursor,
    require_marked,
    upsert_states,
)
from monitor.storage.leases import Fence
from monitor.storage.retained_turns import judged_for_feedback
from monitor.storage.store import Store
from monitor.storage.tables import detector_states, turns, verdicts

CURSOR_NAME = "verdicts"
# Why a save is refused when another run saved since this one read.
_SAVED_SINCE = (
    "the detectors' state was saved by another run since this run read it: "
    "nothing saved, the next run reads the verdicts again"
)
# Verdicts one run reads at most: a backlog (detection off for a while, a store restored)
# is fed over several runs rather than held in memory at once.
READ_LIMIT = 50_000
_CHUNK = 500  # ids per UPDATE ... IN (...): far below SQLite's bound-parameter limit


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
    # The cascade: the turn's conversation, the probability it was drawn with and the cheap
    # look's cell it was drawn from (None: drawn uniformly), which the cell-conditional
    # detectors condition on.
    conversation_id: str = ""
    inclusion_probability: float | None = None
    cheap_cell: str | None = None


@dataclass(frozen=True)
class ReferenceCounts:
    turns: int  # judged ok turns (Kish's effective count when weighted)
    severe_turns: int
    severe_metrics: dict[str, int]
    first: datetime | None  # earliest event timestamp in the window
    last: datetime | None
    judged: int = 0  # judged ok turns as drawn (unweighted)
    # With ``by_cell``: the same per stratum of the cascade's draws (``cell_cusum.stratum``),
    # turns with a stored cell only.
    cells: dict[str, ReferenceCounts] = field(default_factory=dict)


def read_cursor(store: Store) -> Cursor:
    return detector_saves.read_cursor(store, CURSOR_NAME)


def read_new(store: Store, metrics: Sequence[str], limit: int = READ_LIMIT) -> list[Observation]:
    """The verdicts the detectors have not observed yet, in the order stored: the oldest
    ``limit`` of them (a backlog is read over several runs, the rest staying unobserved)."""
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
            turns.c.conversation_id,
            turns.c.inclusion_probability,
            turns.c.cheap_cell,
            *bands,
        )
        .select_from(verdicts.join(turns, turns.c.event_id == verdicts.c.event_id))
        .where(verdicts.c.observed_at.is_(None))
        .order_by(verdicts.c.stored_at, verdicts.c.id)
        .limit(limit)
    )
    out = []
    with store.transaction(write=False) as conn:
        for r in conn.execute(query):
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
                    conversation_id=str(r.conversation_id),
                    inclusion_probability=None
                    if r.inclusion_probability is None
                    else float(r.inclusion_probability),
                    cheap_cell=None if r.cheap_cell is None else str(r.cheap_cell),
                )
            )
    return out


def reference_counts(
    store: Store,
    start: datetime,
    end: datetime,
    metrics: Sequence[str],
    assistants: Collection[str] | None = None,
    *,
    by_cell: bool = False,
) -> dict[str, ReferenceCounts]:
    """Per assistant (of ``assistants``, None: all), judged ok turns (and severe ones, per
    metric) with an event timestamp in [start, end); turns judged because a user complained
    are not of the sample and left out.

    A turn the cascade drew weighs 1 / its probability: the counts are Kish's effective
    sample size (sum w)^2 / sum w^2 and the Hajek share of it, so the baseline is the
    traffic's rate, not the draw's (a store of uniform draws: the plain counts). With
    ``by_cell``, the same per stratum of the cascade's draws (``ReferenceCounts.cells``: the
    turns with a stored cell, by ``cell_cusum.stratum``), the cell-conditional detectors'
    in-control rates."""
    w = 1.0 / sa.func.coalesce(turns.c.inclusion_probability, 1.0)
    severe = [
        sa.func.sum(
            sa.case((verdicts.c.metric_bands[m].as_string() == "severe", w), else_=0.0)
        ).label(f"m_{i}")
        for i, m in enumerate(metrics)
    ]
    columns = [
        turns.c.assistant_name,
        sa.func.count().label("judged"),
        sa.func.sum(w).label("n"),
        sa.func.sum(w * w).label("n2"),
        sa.func.sum(sa.case((verdicts.c.turn_band == "severe", w), else_=0.0)).label("x"),
        sa.func.min(turns.c.event_timestamp).label("first"),
        sa.func.max(turns.c.event_timestamp).label("last"),
        *severe,
    ]
    query = (
        sa.select(*columns)
        .select_from(verdicts.join(turns, turns.c.event_id == verdicts.c.event_id))
        .where(
            turns.c.event_timestamp >= start,
            turns.c.event_timestamp < end,
            verdicts.c.status == "ok",
            ~judged_for_feedback(turns.c.event_id),
        )
    )
    if assistants is not None:
        query = query.where(turns.c.assistant_name.in_(sorted(assistants)))
    out: dict[str, ReferenceCounts] = {}
    cells: dict[str, dict[str, ReferenceCounts]] = {}
    with store.transaction(write=False) as conn:
        for r in conn.execute(query.group_by(turns.c.assistant_name)):
            out[str(r.assistant_name)] = _reference(r._mapping, metrics)
        if by_cell:
            certain = sa.case((turns.c.inclusion_probability >= 1.0, 1), else_=0).label("certain")
            per_cell = (
                query.add_columns(turns.c.cheap_cell, certain)
                .where(turns.c.cheap_cell.is_not(None), turns.c.inclusion_probability.is_not(None))
                .group_by(turns.c.assistant_name, turns.c.cheap_cell, certain)
            )
            for r in conn.execute(per_cell):
                key = stratum(str(r.cheap_cell), 1.0 if r.certain else 0.0)
                cells.setdefault(str(r.assistant_name), {})[key] = _reference(r._mapping, metrics)
    return {name: replace(c, cells=cells.get(name, {})) for name, c in out.items()}


def _reference(m: sa.RowMapping, metrics: Sequence[str]) -> ReferenceCounts:
    total, squares = float(m["n"] or 0.0), float(m["n2"] or 0.0)
    effective = total * total / squares if squares > 0 else 0.0

    def share(weighted: Any) -> int:
        return round(float(weighted or 0.0) / total * effective) if total > 0 else 0

    return ReferenceCounts(
        turns=round(effective),
        severe_turns=share(m["x"]),
        severe_metrics={metric: share(m[f"m_{i}"]) for i, metric in enumerate(metrics)},
        first=m["first"],
        last=m["last"],
        judged=int(m["judged"] or 0),
    )


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
    observed: Collection[int],
    now: datetime,
    *,
    history: bool = False,
    fence: Fence | None = None,
) -> Cursor:
    """In one transaction: mark the verdicts ``observed`` (ids, all read by this run; with
    ``history``, the first run's, every verdict not marked yet), upsert the detectors' rows and
    move the cursor on from ``cursor`` (the one this run read). With a ``fence``, only while
    its owner holds the job's lease. ``LeaseLost``, nothing written, when
    the lease is gone or another run saved since ``cursor`` was read (it moved the generation
    on, or marked one of these verdicts). Returns the cursor saved."""
    ids = sorted(set(observed))
    with store.transaction(write=True, action="saving the detectors' state") as conn:
        moved = move_cursor(conn, store, CURSOR_NAME, cursor, now, fence, _SAVED_SINCE)
        if history:  # one statement, however long the history: nothing is fed from it
            conn.execute(
                sa.update(verdicts).where(verdicts.c.observed_at.is_(None)).values(observed_at=now)
            )
        marked = 0
        for start in range(0, len(ids), _CHUNK):
            mark = (
                sa.update(verdicts)
                .where(
                    verdicts.c.id.in_(ids[start : start + _CHUNK]),
                    verdicts.c.observed_at.is_(None),
                )
                .values(observed_at=now)
            )
            marked += len(conn.execute(mark.returning(verdicts.c.id)).all())
        require_marked(marked, ids, "verdicts", again="the verdicts")
        upsert_states(conn, store, states)
    return moved
