"""SQL for the judge canary (table ``judge_canary_runs``): record a run, read a judge
configuration's first runs (its baseline) and newest ok run (its detector state), and the runs
in a time window (for ``casewatch detect``'s note on whether the judge changed).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from monitor.storage.store import Store
from monitor.storage.tables import human_labels, judge_canary_runs, turns, verdicts

_RUN = judge_canary_runs.c


def record_run(store: Store, row: Mapping[str, Any]) -> None:
    with store.transaction(write=True) as conn:
        conn.execute(sa.insert(judge_canary_runs), [dict(row)])


def first_ok_runs(store: Store, judge: str, config_hash: str, limit: int) -> list[dict[str, Any]]:
    query = (
        sa.select(judge_canary_runs)
        .where(_RUN.judge == judge, _RUN.config_hash == config_hash, _RUN.status == "ok")
        .order_by(_RUN.run_at, _RUN.id)
        .limit(limit)
    )
    with store.transaction(write=False) as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def newest_ok_run(store: Store, judge: str, config_hash: str) -> dict[str, Any] | None:
    query = (
        sa.select(judge_canary_runs)
        .where(_RUN.judge == judge, _RUN.config_hash == config_hash, _RUN.status == "ok")
        .order_by(_RUN.run_at.desc(), _RUN.id.desc())
        .limit(1)
    )
    with store.transaction(write=False) as conn:
        row = conn.execute(query).first()
    return None if row is None else dict(row._mapping)


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
