"""What the sequential detectors' stores share (turn verdicts, case verdicts, outcomes): the
``detector_cursor`` row each kind reads and moves on in the transaction that saves its state,
whose generation refuses a second save from the same read (``LeaseLost``, nothing written), the
marks of what a run observed, and the upsert of the detectors' ``detector_states`` rows.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from monitor.errors import LeaseLost
from monitor.storage.leases import Fence, require_lease
from monitor.storage.store import IN_CHUNK, Store
from monitor.storage.tables import detector_cursor, detector_states


@dataclass(frozen=True)
class Cursor:
    """Whether (and when) the detectors last saved, and the generation that save left."""

    position: datetime | None = None  # None: the job never ran on this store
    generation: int = 0


@dataclass(frozen=True)
class LiveCounts:
    """Judged ok turns of one assistant stored in the rate window, and in the burst window."""

    turns: int
    first: datetime | None  # the earliest stored_at among them
    recent: int


def read_cursor(store: Store, name: str) -> Cursor:
    """The ``detector_cursor`` row ``name`` (``Cursor()``: never saved on this store)."""
    with store.transaction(write=False) as conn:
        row = conn.execute(sa.select(detector_cursor).where(detector_cursor.c.name == name)).first()
    if row is None:
        return Cursor()
    return Cursor(row.position, int(row.generation))


def move_cursor(
    conn: sa.Connection,
    store: Store,
    name: str,
    cursor: Cursor,
    now: datetime,
    fence: Fence | None,
    lost: str,
) -> Cursor:
    """Within a save's transaction: with a ``fence``, require its owner still holds the job's
    lease; then move the cursor ``name`` on from ``cursor`` (the one the run read) to ``now``.
    ``LeaseLost`` with the message ``lost`` when another run saved since. Returns the cursor
    saved."""
    if fence is not None:
        require_lease(conn, fence.job, fence.owner, fence.at)
    moved = Cursor(now, cursor.generation + 1)
    values = {"position": now, "generation": moved.generation, "updated_at": now}
    # Rows RETURNING, not rowcount: psycopg reports no count for INSERT ... ON CONFLICT.
    if cursor.position is None:
        insert = store.upsert(detector_cursor, ["name"], values={"name": name, **values})
        taken = len(conn.execute(insert.returning(detector_cursor.c.name)).all())
    else:
        update = (
            sa.update(detector_cursor)
            .where(
                detector_cursor.c.name == name,
                detector_cursor.c.generation == cursor.generation,
            )
            .values(**values)
        )
        taken = len(conn.execute(update.returning(detector_cursor.c.name)).all())
    if taken != 1:
        raise LeaseLost(lost)
    return moved


def mark_observed(
    conn: sa.Connection, store: Store, marks: sa.Table, key: str, ids: Sequence[Any], now: datetime
) -> int:
    """Insert an observation row (``key``, ``observed_at``) into ``marks`` for each of ``ids``
    not marked yet, in chunks; how many were new."""
    marked = 0
    for start in range(0, len(ids), IN_CHUNK):
        chunk = ids[start : start + IN_CHUNK]
        mark = store.upsert(marks, [key])
        result = conn.execute(
            mark.returning(marks.c[key]), [{key: i, "observed_at": now} for i in chunk]
        )
        marked += len(result.all())
    return marked


def require_marked(marked: int, ids: Sequence[Any], what: str, again: str = "them") -> None:
    """``LeaseLost`` unless this run marked all ``ids`` (the ``what`` it read): another run
    observed the rest."""
    if marked != len(ids):
        raise LeaseLost(
            f"{len(ids) - marked} of the {what} this run read were observed by another "
            f"run: nothing saved, the next run reads {again} again"
        )


def upsert_states(conn: sa.Connection, store: Store, states: Iterable[Mapping[str, Any]]) -> None:
    """Insert or replace the detectors' ``detector_states`` rows (one per assistant and signal)."""
    rows = [dict(s) for s in states]
    if rows:
        keys = [c.name for c in detector_states.c if c.name not in ("assistant", "signal")]
        conn.execute(store.upsert(detector_states, ["assistant", "signal"], keys), rows)


@dataclass(frozen=True)
class Marks:
    """How one kind of detector (case verdicts, outcomes) saves what a run observed."""

    cursor: str  # its ``detector_cursor`` row
    saved_since: str  # the ``LeaseLost`` message when another run saved since this one read
    table: sa.Table  # its marks
    key: str  # the observed row's id, a column of ``table``
    what: str  # the observed rows as a message names them ("case verdicts")
    action: str  # the transaction's name in errors ("saving the case detectors' state")
    # (id, observed_at = the given time) of every row no mark holds yet: what a first run
    # marks as history, not as observations
    unmarked: Callable[[datetime], sa.Select[Any]]


def save(
    store: Store,
    marks: Marks,
    states: Iterable[Mapping[str, Any]],
    cursor: Cursor,
    observed: Collection[Any],
    now: datetime,
    *,
    history: bool = False,
    fence: Fence | None = None,
) -> Cursor:
    """In one transaction: mark the rows ``observed`` (with ``history``, every one not marked
    yet), upsert the detectors' rows and move the cursor on from ``cursor``. With a ``fence``,
    only while its owner holds the job's lease. ``LeaseLost``, nothing written, when the lease
    is gone or another run saved since ``cursor`` was read."""
    ids = sorted(set(observed))
    with store.transaction(write=True, action=marks.action) as conn:
        moved = move_cursor(conn, store, marks.cursor, cursor, now, fence, marks.saved_since)
        if history:
            conn.execute(
                sa.insert(marks.table).from_select([marks.key, "observed_at"], marks.unmarked(now))
            )
        marked = mark_observed(conn, store, marks.table, marks.key, ids, now)
        require_marked(marked, ids, marks.what)
        upsert_states(conn, store, states)
    return moved
