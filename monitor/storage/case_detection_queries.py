"""SQL for the case detectors: case verdicts not observed yet, reference and live counts, and
the state saved with the marks, in one transaction.

The turn detectors' scheme (``detection_queries``) for case verdicts: a verdict is observed once
a row for it is in ``case_verdict_observations``, written in the transaction that saves the
detectors' state, so a verdict is read by the first run after it committed whenever that was,
and never again. The detectors' rows go to ``detector_states`` beside the turn ones (their
signals are the case signals); their cursor is the ``detector_cursor`` row ``case_verdicts``,
whose generation refuses a second save from the same read (``LeaseLost``, nothing written).
Every case verdict version is an observation: a resumed case judged again counts again.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from monitor.stats.detection_signals import CASE_SEVERE, CASE_UNRESOLVED
from monitor.storage import detector_saves
from monitor.storage.detector_saves import (
    Cursor,
    LiveCounts,
)
from monitor.storage.store import Store
from monitor.storage.tables import case_verdict_observations, case_verdicts

CURSOR_NAME = "case_verdicts"
# Why a save is refused when another run saved since this one read.
_SAVED_SINCE = (
    "the case detectors' state was saved by another run since this run read it: "
    "nothing saved, the next run reads the case verdicts again"
)
READ_LIMIT = 50_000

_SEVERE = sa.case((case_verdicts.c.case_band == "severe", 1), else_=0)
_UNRESOLVED = sa.case((case_verdicts.c.resolution_outcome == "unresolved", 1), else_=0)


@dataclass(frozen=True)
class CaseObservation:
    """One case verdict as the detectors read it (``ok`` False: judge_failed, not observed)."""

    id: int
    assistant: str
    judged_at: datetime
    ok: bool
    values: Mapping[str, bool]  # case signal name -> its 0/1 for this verdict


@dataclass(frozen=True)
class CaseCounts:
    cases: int  # ok case verdicts
    severe: Mapping[str, int]  # case signal name -> verdicts where it is 1


def read_cursor(store: Store) -> Cursor:
    return detector_saves.read_cursor(store, CURSOR_NAME)


def _unobserved() -> Any:
    seen = (
        sa.select(case_verdict_observations.c.case_verdict_id)
        .where(case_verdict_observations.c.case_verdict_id == case_verdicts.c.id)
        .exists()
    )
    return ~seen


def read_new(store: Store, limit: int = READ_LIMIT) -> list[CaseObservation]:
    """The oldest ``limit`` case verdicts the detectors have not observed yet."""
    query = (
        sa.select(
            case_verdicts.c.id,
            case_verdicts.c.assistant_name,
            case_verdicts.c.judged_at,
            case_verdicts.c.status,
            case_verdicts.c.case_band,
            case_verdicts.c.resolution_outcome,
        )
        .where(_unobserved())
        .order_by(case_verdicts.c.judged_at, case_verdicts.c.id)
        .limit(limit)
    )
    with store.transaction(write=False, action="reading new case verdicts") as conn:
        rows = conn.execute(query).all()
    out = []
    for r in rows:
        ok = r.status == "ok"
        out.append(
            CaseObservation(
                id=int(r.id),
                assistant=str(r.assistant_name),
                judged_at=r.judged_at,
                ok=ok,
                values={
                    CASE_SEVERE: ok and r.case_band == "severe",
                    CASE_UNRESOLVED: ok and r.resolution_outcome == "unresolved",
                },
            )
        )
    return out


def reference_counts(
    store: Store, start: datetime, end: datetime, assistants: Collection[str] | None = None
) -> dict[str, CaseCounts]:
    """Per assistant, ok case verdicts judged in [start, end) and how many had each signal."""
    query = (
        sa.select(
            case_verdicts.c.assistant_name,
            sa.func.count().label("n"),
            sa.func.sum(_SEVERE).label("severe"),
            sa.func.sum(_UNRESOLVED).label("unresolved"),
        )
        .where(
            case_verdicts.c.judged_at >= start,
            case_verdicts.c.judged_at < end,
            case_verdicts.c.status == "ok",
        )
        .group_by(case_verdicts.c.assistant_name)
    )
    if assistants is not None:
        query = query.where(case_verdicts.c.assistant_name.in_(sorted(assistants)))
    with store.transaction(write=False) as conn:
        return {
            str(r.assistant_name): CaseCounts(
                int(r.n),
                {CASE_SEVERE: int(r.severe or 0), CASE_UNRESOLVED: int(r.unresolved or 0)},
            )
            for r in conn.execute(query)
        }


def live_counts(store: Store, since: datetime, recent_since: datetime) -> dict[str, LiveCounts]:
    """Per assistant, ok case verdicts judged since ``since`` (and since ``recent_since``): the
    rate the case detectors are fed."""
    query = (
        sa.select(
            case_verdicts.c.assistant_name,
            sa.func.count().label("n"),
            sa.func.min(case_verdicts.c.judged_at).label("first"),
            sa.func.sum(sa.case((case_verdicts.c.judged_at >= recent_since, 1), else_=0)).label(
                "r"
            ),
        )
        .where(case_verdicts.c.judged_at >= since, case_verdicts.c.status == "ok")
        .group_by(case_verdicts.c.assistant_name)
    )
    with store.transaction(write=False) as conn:
        return {
            str(r.assistant_name): LiveCounts(int(r.n), r.first, int(r.r or 0))
            for r in conn.execute(query)
        }


MARKS = detector_saves.Marks(
    cursor=CURSOR_NAME,
    saved_since=_SAVED_SINCE,
    table=case_verdict_observations,
    key="case_verdict_id",
    what="case verdicts",
    action="saving the case detectors' state",
    # the case verdicts before the first run: history, not observations
    unmarked=lambda now: sa.select(
        case_verdicts.c.id, sa.literal(now, case_verdicts.c.judged_at.type)
    ).where(_unobserved()),
)
