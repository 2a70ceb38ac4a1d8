"""SQL for the outcome detectors: outcome events not observed yet, reference and live counts per
outcome signal, and the state saved with the marks, in one transaction.

The case detectors' scheme (``case_detection_queries``) for outcome events: an outcome is
observed once a row for it is in ``outcome_observations``, written in the transaction that saves
the detectors' state, so an outcome is read by the first run after it was stored whenever that
was, and never again (a duplicated or replayed event is one row of ``outcome_events``, so it is
one observation). The detectors' rows go to ``detector_states`` beside the turn and case ones
(their signals are the outcome signals); their cursor is the ``detector_cursor`` row
``outcomes``, whose generation refuses a second save from the same read (``LeaseLost``, nothing
written).

What each outcome is an observation of (``OBSERVES``): feedback with a polarity, of
``negative_feedback`` (1 when negative); a hand-off, of ``handoff`` (1); a resolution, of
``handoff`` (0) and of ``reopen`` (0); a reopening, of ``reopen`` (1). Satisfaction scores are
marked read but observe nothing (the negative-feedback signal is the feedback on turns). Every
outcome counts, joined to a stored turn or not: these signals cover all traffic. Windows are
on ``received_at`` (when casewatch stored the outcome: indexed, and a late event lands in the
window it arrived in).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from monitor.stats.detection_signals import HANDOFF, NEGATIVE_FEEDBACK, OUTCOME_SIGNALS, REOPEN
from monitor.storage import detector_saves
from monitor.storage.detector_saves import (
    Cursor,
    LiveCounts,
)
from monitor.storage.store import Store
from monitor.storage.tables import outcome_events, outcome_observations

CURSOR_NAME = "outcomes"
# Why a save is refused when another run saved since this one read.
_SAVED_SINCE = (
    "the outcome detectors' state was saved by another run since this run read it: "
    "nothing saved, the next run reads the outcomes again"
)
READ_LIMIT = 50_000

_o = outcome_events.c
# Per outcome signal: (SQL: the outcome is an observation of it, SQL: the observation is 1).
_IN: dict[str, tuple[Any, Any]] = {
    NEGATIVE_FEEDBACK: (
        sa.and_(_o.kind == "feedback", _o.polarity.is_not(None)),
        sa.and_(_o.kind == "feedback", _o.polarity == "negative"),
    ),
    HANDOFF: (_o.kind.in_(("handed_off", "resolved")), _o.kind == "handed_off"),
    REOPEN: (_o.kind.in_(("resolved", "reopened")), _o.kind == "reopened"),
}


def observes(kind: str, polarity: str | None) -> dict[str, bool]:
    """The outcome signals an outcome of ``kind`` (and ``polarity``) is an observation of, and
    its 0/1 for each (empty: read, observes nothing)."""
    if kind == "feedback":
        return {} if polarity is None else {NEGATIVE_FEEDBACK: polarity == "negative"}
    if kind == "handed_off":
        return {HANDOFF: True}
    if kind == "resolved":
        return {HANDOFF: False, REOPEN: False}
    if kind == "reopened":
        return {REOPEN: True}
    return {}


@dataclass(frozen=True)
class OutcomeObservation:
    id: str  # the outcome id
    assistant: str
    timestamp: datetime  # the event's own
    values: Mapping[str, bool]  # outcome signal name -> its 0/1 for this outcome


@dataclass(frozen=True)
class SignalCounts:
    n: int  # outcomes observing the signal
    x: int  # of which 1


def read_cursor(store: Store) -> Cursor:
    return detector_saves.read_cursor(store, CURSOR_NAME)


def _unobserved() -> Any:
    seen = (
        sa.select(outcome_observations.c.outcome_id)
        .where(outcome_observations.c.outcome_id == _o.outcome_id)
        .exists()
    )
    return ~seen


def read_new(store: Store, limit: int = READ_LIMIT) -> list[OutcomeObservation]:
    """The oldest ``limit`` outcomes (by when they were stored) not observed yet."""
    query = (
        sa.select(_o.outcome_id, _o.assistant_name, _o.event_timestamp, _o.kind, _o.polarity)
        .where(_unobserved())
        .order_by(_o.received_at, _o.outcome_id)
        .limit(limit)
    )
    with store.transaction(write=False, action="reading new outcomes") as conn:
        rows = conn.execute(query).all()
    return [
        OutcomeObservation(
            str(r.outcome_id),
            str(r.assistant_name),
            r.event_timestamp,
            observes(str(r.kind), r.polarity),
        )
        for r in rows
    ]


def reference_counts(
    store: Store, start: datetime, end: datetime, assistants: Collection[str] | None = None
) -> dict[str, dict[str, SignalCounts]]:
    """Per assistant and outcome signal, the outcomes stored in [start, end) observing it, and
    how many of them were 1."""
    sums = []
    for name in OUTCOME_SIGNALS:
        member, one = _IN[name]
        sums.append(sa.func.sum(sa.case((member, 1), else_=0)).label(f"{name}_n"))
        sums.append(sa.func.sum(sa.case((one, 1), else_=0)).label(f"{name}_x"))
    query = (
        sa.select(_o.assistant_name, *sums)
        .where(_o.received_at >= start, _o.received_at < end)
        .group_by(_o.assistant_name)
    )
    if assistants is not None:
        query = query.where(_o.assistant_name.in_(sorted(assistants)))
    with store.transaction(write=False, action="reading the outcomes' reference") as conn:
        out = {}
        for r in conn.execute(query):
            m = r._mapping
            out[str(r.assistant_name)] = {
                name: SignalCounts(int(m[f"{name}_n"] or 0), int(m[f"{name}_x"] or 0))
                for name in OUTCOME_SIGNALS
            }
        return out


def live_counts(
    store: Store, since: datetime, recent_since: datetime
) -> dict[str, dict[str, LiveCounts]]:
    """Per assistant and outcome signal, the outcomes observing it stored since ``since`` (and
    since ``recent_since``): the rate each outcome detector is fed."""
    cols = []
    for name in OUTCOME_SIGNALS:
        member, _ = _IN[name]
        recent = sa.and_(member, _o.received_at >= recent_since)
        cols += [
            sa.func.sum(sa.case((member, 1), else_=0)).label(f"{name}_n"),
            sa.func.min(sa.case((member, _o.received_at), else_=None)).label(f"{name}_first"),
            sa.func.sum(sa.case((recent, 1), else_=0)).label(f"{name}_r"),
        ]
    query = sa.select(_o.assistant_name, *cols).where(_o.received_at >= since)
    query = query.group_by(_o.assistant_name)
    out: dict[str, dict[str, LiveCounts]] = {}
    with store.transaction(write=False, action="reading the outcomes' live rate") as conn:
        for r in conn.execute(query):
            m = r._mapping
            per = {}
            for name in OUTCOME_SIGNALS:
                n = int(m[f"{name}_n"] or 0)
                if n:
                    per[name] = LiveCounts(n, m[f"{name}_first"], int(m[f"{name}_r"] or 0))
            out[str(r.assistant_name)] = per
    return out


MARKS = detector_saves.Marks(
    cursor=CURSOR_NAME,
    saved_since=_SAVED_SINCE,
    table=outcome_observations,
    key="outcome_id",
    what="outcomes",
    action="saving the outcome detectors' state",
    # the outcomes stored before the first run: history, not observations
    unmarked=lambda now: sa.select(_o.outcome_id, sa.literal(now, _o.received_at.type)).where(
        _unobserved()
    ),
)
