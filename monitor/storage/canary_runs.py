"""SQL for the judge canary (table ``judge_canary_runs``): record a run from the judge
configuration's first runs (its baseline) and newest ok run (its detector state), read and
written in one transaction fenced on the job's lease; and the runs in a time window (for
``casewatch detect``'s note on whether the judge changed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from monitor.storage.leases import Fence, require_lease
from monitor.storage.store import Store
from monitor.storage.tables import human_labels, judge_canary_runs, turns, verdicts

_RUN = judge_canary_runs.c


@dataclass(frozen=True)
class History:
    """What a judge configuration's next run is computed from."""

    first: Sequence[Mapping[str, Any]]  # its first ok runs, oldest first (the baseline)
    newest: Mapping[str, Any] | None  # its newest ok run (the detector's state)


def _history_queries(judge: str, config_hash: str, baseline_runs: int) -> tuple[Any, Any]:
    mine = sa.and_(_RUN.judge == judge, _RUN.config_hash == config_hash, _RUN.status == "ok")
    first = (
        sa.select(judge_canary_runs).where(mine).order_by(_RUN.run_at, _RUN.id).limit(baseline_runs)
    )
    newest = (
        sa.select(judge_canary_runs)
        .where(mine)
        .order_by(_RUN.run_at.desc(), _RUN.id.desc())
        .limit(1)
    )
    return first, newest


def _history(conn: sa.Connection, queries: tuple[Any, Any]) -> History:
    first = [dict(r._mapping) for r in conn.execute(queries[0])]
    newest = conn.execute(queries[1]).first()
    return History(first, None if newest is None else dict(newest._mapping))


def read_history(store: Store, judge: str, config_hash: str, baseline_runs: int) -> History:
    """The history as it is now, outside any write (``record_run`` reads it again)."""
    with store.transaction(write=False) as conn:
        return _history(conn, _history_queries(judge, config_hash, baseline_runs))


def record_run(
    store: Store,
    judge: str,
    config_hash: str,
    baseline_runs: int,
    make_row: Callable[[History], Mapping[str, Any]],
    *,
    fence: Fence | None = None,
) -> dict[str, Any]:
    """Read the configuration's history, make the run's row from it and insert it, in one
    transaction: two writers never both continue from the same newest state. With a
    ``fence``, only while its owner holds the job's lease (``LeaseLost`` otherwise, nothing
    written; on PostgreSQL the lease row stays locked until the commit)."""
    queries = _history_queries(judge, config_hash, baseline_runs)
    with store.transaction(write=True, action="saving a judge canary run") as conn:
        if fence is not None:
            require_lease(conn, fence.job, fence.owner, fence.at)
        row = dict(make_row(_history(conn, queries)))
        conn.execute(sa.insert(judge_canary_runs), [row])
    return row


def runs_since(store: Store, since: datetime) -> list[dict[str, Any]]:
    """Every canary run at or after ``since``, oldest first."""
    query = sa.select(judge_canary_runs).where(_RUN.run_at >= since).order_by(_RUN.run_at, _RUN.id)
    with store.transaction(write=False) as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def verdict_hashes_since(store: Store, since: datetime) -> list[str]:
    """The judge configuration hashes of verdicts stored at or after ``since``."""
    query = (
        sa.select(verdicts.c.judge_config_hash)
        .where(verdicts.c.stored_at >= since)
        .group_by(verdicts.c.judge_config_hash)
        .order_by(sa.func.min(verdicts.c.stored_at))
    )
    with store.transaction(write=False) as conn:
        return [str(h) for (h,) in conn.execute(query)]


def oldest_labelled_turns(
    store: Store, limit: int
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """The ``limit`` turns labelled first that the store still holds: their events, and every
    label given to them (a canary drawn from the store stays the same set as labels grow)."""
    first_label = sa.func.min(human_labels.c.id)
    query = (
        sa.select(human_labels.c.event_id)
        .where(sa.exists().where(turns.c.event_id == human_labels.c.event_id))
        .group_by(human_labels.c.event_id)
        .order_by(first_label)
        .limit(limit)
    )
    with store.transaction(write=False) as conn:
        ids = [str(e) for (e,) in conn.execute(query)]
        events = {
            str(e): dict(doc)
            for e, doc in conn.execute(
                sa.select(turns.c.event_id, turns.c.event).where(turns.c.event_id.in_(ids))
            )
        }
        rows = [
            dict(r._mapping)
            for r in conn.execute(
                sa.select(
                    human_labels.c.event_id,
                    human_labels.c.metric,
                    human_labels.c.band,
                ).where(human_labels.c.event_id.in_(list(events)))
            )
        ]
    return events, rows
