"""SQL for failure modes: the failed turns of a window with their reasons, the modes known
before, one run's modes saved, and the reads behind ``casewatch inspect failures``.

A failed turn is one whose newest verdict (the same anti-join as drift and ``inspect``) is
``ok`` with a severe or moderate turn band. Its reasons are, per failing metric, the
justification of the judge that scored that metric lowest; the judgments come in the same
query, one row per judgment, so a window is one streamed query whatever its size. Only the
query and those reasons leave the database, never the contexts or the answer.

A failed case is one whose newest case verdict is ``ok`` with a severe or moderate case band,
judged in the window. It is read as a failed turn is (``FailedTurn``): its conversation id in
``event_id``, its judged time in ``at``, the failing case metrics with the reasons of the case
judge that scored each lowest, and the query of its first stored turn (empty once retention
purged the turns). Modes of cases are kept apart from modes of turns by ``unit`` on every
table: the two are grouped, recognised, listed and forgotten separately.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from monitor.stats.failure_features import FailedTurn
from monitor.stats.failure_modes import Grouping, KnownMode
from monitor.storage.leases import Fence, require_lease
from monitor.storage.store import Store
from monitor.storage.tables import (
    case_judgments,
    case_verdicts,
    failure_mode_members,
    failure_mode_runs,
    failure_modes,
    judgments,
    turns,
    verdicts,
)

FAILED_BANDS = ("severe", "moderate")
_STREAM_ROWS = 2_000
_INSERT_CHUNK = 5_000
KNOWN_LIMIT = 200  # the modes recognisable in a run: the most recently found
TURN = "turn"
CASE = "case"
UNITS = (TURN, CASE)


def _newest_verdict() -> sa.ColumnElement[bool]:
    newer = sa.alias(verdicts, "newer")
    return ~(
        sa.select(newer.c.id)
        .where(newer.c.event_id == verdicts.c.event_id, newer.c.id > verdicts.c.id)
        .exists()
    )


def _failed_where(
    status: Any,
    band: Any,
    at: Any,
    newest: sa.ColumnElement[bool],
    assistant_name: Any,
    assistant: str | None,
    start: datetime,
    end: datetime,
) -> list[Any]:
    """The conditions of a failed unit: its newest verdict, ok, of a failed band, ``at`` in
    [start, end), of ``assistant`` (None: any)."""
    where: list[Any] = [
        status == "ok",
        band.in_(FAILED_BANDS),
        at >= start,
        at < end,
        newest,
    ]
    if assistant is not None:
        where.append(assistant_name == assistant)
    return where


def _failed(assistant: str | None, start: datetime, end: datetime) -> list[Any]:
    v, t = verdicts.c, turns.c
    newest = _newest_verdict()
    return _failed_where(
        v.status, v.turn_band, t.event_timestamp, newest, t.assistant_name, assistant, start, end
    )


def assistants_with_failures(store: Store, start: datetime, end: datetime) -> list[str]:
    query = (
        sa.select(turns.c.assistant_name)
        .select_from(turns.join(verdicts, verdicts.c.event_id == turns.c.event_id))
        .where(*_failed(None, start, end))
        .distinct()
        .order_by(turns.c.assistant_name)
    )
    with store.transaction(write=False) as conn:
        return [str(a) for a in conn.scalars(query)]


def count_failed(store: Store, assistant: str, start: datetime, end: datetime) -> int:
    query = (
        sa.select(sa.func.count())
        .select_from(turns.join(verdicts, verdicts.c.event_id == turns.c.event_id))
        .where(*_failed(assistant, start, end))
    )
    with store.transaction(write=False) as conn:
        return int(conn.scalar(query) or 0)


def _reasons(
    bands: Mapping[str, str], docs: Sequence[Any]
) -> tuple[tuple[str, ...], dict[str, str]]:
    failing = tuple(sorted(m for m, b in bands.items() if b in FAILED_BANDS))
    lowest: dict[str, tuple[float, str]] = {}
    for doc in docs:
        for metric, entry in (doc or {}).items():
            if metric not in failing or not isinstance(entry, dict):
                continue
            score = float(entry.get("score", 1.0))
            if metric not in lowest or score < lowest[metric][0]:
                lowest[metric] = (score, str(entry.get("justification", "")))
    return failing, {m: r for m, (_, r) in lowest.items()}


def failed_turns(
    store: Store, assistant: str, start: datetime, end: datetime, *, limit: int
) -> Iterator[FailedTurn]:
    """The failed turns of ``assistant`` with event timestamps in [start, end), newest first,
    at most ``limit`` of them, streamed."""
    newest = (
        sa.select(verdicts.c.id)
        .select_from(turns.join(verdicts, verdicts.c.event_id == turns.c.event_id))
        .where(*_failed(assistant, start, end))
        .order_by(turns.c.event_timestamp.desc(), verdicts.c.id.desc())
        .limit(limit)
        .subquery()
    )
    query = (
        sa.select(
            verdicts.c.id,
            turns.c.event_id,
            turns.c.event_timestamp,
            turns.c.event["query"].as_string().label("query"),
            verdicts.c.metric_bands,
            verdicts.c.turn_band,
            judgments.c.scores,
        )
        .select_from(
            newest.join(verdicts, verdicts.c.id == newest.c.id)
            .join(turns, turns.c.event_id == verdicts.c.event_id)
            .outerjoin(judgments, judgments.c.verdict_id == verdicts.c.id)
        )
        .order_by(turns.c.event_timestamp.desc(), verdicts.c.id.desc())
    )
    with store.transaction(write=False) as conn:
        result = conn.execution_options(stream_results=True, yield_per=_STREAM_ROWS).execute(query)
        yield from _grouped_rows(result)


def _turn(row: Any, docs: Sequence[Any]) -> FailedTurn:
    failing, reasons = _reasons(row.metric_bands or {}, docs)
    return FailedTurn(
        event_id=str(row.event_id),
        at=row.event_timestamp,
        query=str(row.query or ""),
        failing=failing,
        reasons=reasons,
        band=str(row.turn_band),
    )


def _newest_case() -> sa.ColumnElement[bool]:
    newer = sa.alias(case_verdicts, "newer_case")
    return ~(
        sa.select(newer.c.id)
        .where(
            newer.c.assistant_name == case_verdicts.c.assistant_name,
            newer.c.conversation_id == case_verdicts.c.conversation_id,
            newer.c.version > case_verdicts.c.version,
        )
        .exists()
    )


def _failed_case(assistant: str | None, start: datetime, end: datetime) -> list[Any]:
    c = case_verdicts.c
    newest = _newest_case()
    return _failed_where(
        c.status, c.case_band, c.judged_at, newest, c.assistant_name, assistant, start, end
    )


def assistants_with_failed_cases(store: Store, start: datetime, end: datetime) -> list[str]:
    query = (
        sa.select(case_verdicts.c.assistant_name)
        .where(*_failed_case(None, start, end))
        .distinct()
        .order_by(case_verdicts.c.assistant_name)
    )
    with store.transaction(write=False) as conn:
        return [str(a) for a in conn.scalars(query)]


def count_failed_cases(store: Store, assistant: str, start: datetime, end: datetime) -> int:
    query = sa.select(sa.func.count()).select_from(case_verdicts)
    query = query.where(*_failed_case(assistant, start, end))
    with store.transaction(write=False) as conn:
        return int(conn.scalar(query) or 0)


def _first_query() -> Any:
    """The query of the case's first stored turn (NULL once its turns are purged)."""
    return (
        sa.select(turns.c.event["query"].as_string())
        .where(
            turns.c.assistant_name == case_verdicts.c.assistant_name,
            turns.c.conversation_id == case_verdicts.c.conversation_id,
        )
        .order_by(turns.c.turn_index, turns.c.event_timestamp, turns.c.event_id)
        .limit(1)
        .correlate(case_verdicts)
        .scalar_subquery()
    )


def _case_rows(ids: Any) -> Any:
    """The cases whose verdict ids ``ids`` selects, one row per case judgment, newest first."""
    return (
        sa.select(
            case_verdicts.c.id,
            case_verdicts.c.conversation_id.label("event_id"),
            case_verdicts.c.judged_at.label("event_timestamp"),
            _first_query().label("query"),
            case_verdicts.c.metric_bands,
            case_verdicts.c.case_band.label("turn_band"),
            case_judgments.c.scores,
        )
        .select_from(
            ids.join(case_verdicts, case_verdicts.c.id == ids.c.id).outerjoin(
                case_judgments, case_judgments.c.case_verdict_id == case_verdicts.c.id
            )
        )
        .order_by(case_verdicts.c.judged_at.desc(), case_verdicts.c.id.desc())
    )


def _grouped_rows(rows: Any) -> Iterator[FailedTurn]:
    """One ``FailedTurn`` per run of rows with the same id (one row per judgment), in order."""
    current: Any = None
    docs: list[Any] = []
    for row in rows:
        if current is not None and row.id != current.id:
            yield _turn(current, docs)
            docs = []
        current = row
        docs.append(row.scores)
    if current is not None:
        yield _turn(current, docs)


def failed_cases(
    store: Store, assistant: str, start: datetime, end: datetime, *, limit: int
) -> Iterator[FailedTurn]:
    """The failed cases of ``assistant`` judged in [start, end), newest first, at most
    ``limit`` of them, streamed (each as a ``FailedTurn`` keyed by its conversation id)."""
    newest = (
        sa.select(case_verdicts.c.id)
        .where(*_failed_case(assistant, start, end))
        .order_by(case_verdicts.c.judged_at.desc(), case_verdicts.c.id.desc())
        .limit(limit)
        .subquery()
    )
    with store.transaction(write=False) as conn:
        result = conn.execution_options(stream_results=True, yield_per=_STREAM_ROWS).execute(
            _case_rows(newest)
        )
        yield from _grouped_rows(result)


def known_modes(store: Store, assistant: str, unit: str = TURN) -> list[KnownMode]:
    query = (
        sa.select(failure_modes)
        .where(failure_modes.c.assistant == assistant, failure_modes.c.unit == unit)
        .order_by(failure_modes.c.updated_at.desc(), failure_modes.c.mode_id)
        .limit(KNOWN_LIMIT)
    )
    with store.transaction(write=False) as conn:
        return [
            KnownMode(
                r.mode_id,
                {str(k): float(v) for k, v in (r.terms or {}).items()},
                tuple(r.metrics or ()),
                r.first_seen,
            )
            for r in conn.execute(query)
        ]


def save_run(
    store: Store,
    assistant: str,
    grouping: Grouping,
    run_at: datetime,
    *,
    over_cap: int,
    fence: Fence | None = None,
    prune_runs_before: datetime | None = None,
    unit: str = TURN,
) -> None:
    """One run's modes, memberships and run row for ``assistant``'s ``unit`` (turns or cases),
    in one transaction (fenced on the job's lease when ``fence`` is given: a run whose lease
    lapsed saves nothing)."""
    with store.transaction(write=True, action="saving failure modes") as conn:
        if fence is not None:
            require_lease(conn, fence.job, fence.owner, fence.at)
        mine = sa.and_(failure_modes.c.assistant == assistant, failure_modes.c.unit == unit)
        conn.execute(sa.update(failure_modes).where(mine).values(present=False))
        for m in grouping.modes:
            values = {
                "label": m.label,
                "terms": m.terms,
                "metrics": list(m.metrics),
                "first_seen": m.first_seen,
                "last_seen": m.last_seen,
                "updated_at": run_at,
                "present": True,
                "size": m.size,
                "share": m.share,
                "recent": m.recent,
                "earlier": m.earlier,
                "trend": m.trend,
                "new": m.new,
                "growing": m.growing,
                "examples": list(m.examples),
                "unit": unit,
            }
            updated = conn.execute(
                sa.update(failure_modes)
                .where(failure_modes.c.assistant == assistant, failure_modes.c.mode_id == m.mode_id)
                .values(**values)
            ).rowcount
            if not updated:
                conn.execute(
                    sa.insert(failure_modes).values(
                        assistant=assistant, mode_id=m.mode_id, **values
                    )
                )
        conn.execute(sa.delete(failure_mode_members).where(_members_of(assistant, unit)))
        rows = [
            {
                "assistant": assistant,
                "unit": unit,
                "event_id": e,
                "mode_id": m.mode_id,
                "event_timestamp": at,
            }
            for m in grouping.modes
            for e, at in zip(m.members, m.member_times, strict=True)
        ]
        for i in range(0, len(rows), _INSERT_CHUNK):
            conn.execute(sa.insert(failure_mode_members), rows[i : i + _INSERT_CHUNK])
        conn.execute(
            sa.insert(failure_mode_runs).values(
                run_at=run_at,
                assistant=assistant,
                status=grouping.status,
                turns=grouping.turns,
                recent_turns=grouping.recent_turns,
                grouped=grouping.grouped,
                unsorted=grouping.unsorted,
                over_cap=over_cap,
                modes=len(grouping.modes),
                emerging=sum(1 for m in grouping.modes if m.emerging),
                note=grouping.note,
                unit=unit,
            )
        )
        if prune_runs_before is not None:
            conn.execute(
                sa.delete(failure_mode_runs).where(failure_mode_runs.c.run_at < prune_runs_before)
            )


def _members_of(assistant: str, unit: str) -> sa.ColumnElement[bool]:
    return sa.and_(
        failure_mode_members.c.assistant == assistant, failure_mode_members.c.unit == unit
    )


def forget_assistant(store: Store, assistant: str, unit: str = TURN) -> None:
    """An assistant with no failed turn (or case) left in the window: its modes of that unit
    are no longer present."""
    with store.transaction(write=True) as conn:
        conn.execute(
            sa.update(failure_modes)
            .where(failure_modes.c.assistant == assistant, failure_modes.c.unit == unit)
            .values(present=False)
        )
        conn.execute(sa.delete(failure_mode_members).where(_members_of(assistant, unit)))


def assistants_with_modes(store: Store, unit: str = TURN) -> list[str]:
    query = (
        sa.select(failure_modes.c.assistant)
        .where(failure_modes.c.present, failure_modes.c.unit == unit)
        .distinct()
        .order_by(failure_modes.c.assistant)
    )
    with store.transaction(write=False) as conn:
        return [str(a) for a in conn.scalars(query)]


# ------------------------------------------------------------------ reads for ``inspect``


@dataclass(frozen=True)
class ModeRow:
    assistant: str
    mode_id: str
    label: str
    metrics: tuple[str, ...]
    size: int
    share: float
    recent: int
    earlier: int
    trend: float | None
    first_seen: datetime
    last_seen: datetime
    updated_at: datetime
    present: bool
    new: bool
    growing: bool
    examples: tuple[str, ...]
    unit: str = TURN


def _mode_row(r: Any) -> ModeRow:
    return ModeRow(
        r.assistant, r.mode_id, r.label, tuple(r.metrics or ()), r.size, r.share, r.recent,
        r.earlier, r.trend, r.first_seen, r.last_seen, r.updated_at, bool(r.present),
        bool(r.new), bool(r.growing), tuple(r.examples or ()), str(r.unit),
    )  # fmt: skip


def list_modes(
    store: Store, assistant: str | None, *, include_gone: bool = False, unit: str = TURN
) -> list[ModeRow]:
    """Modes of ``unit`` largest first (of the newest run; with ``include_gone``, the others
    after)."""
    query = sa.select(failure_modes).where(failure_modes.c.unit == unit)
    if assistant is not None:
        query = query.where(failure_modes.c.assistant == assistant)
    if not include_gone:
        query = query.where(failure_modes.c.present)
    query = query.order_by(
        failure_modes.c.present.desc(), failure_modes.c.size.desc(), failure_modes.c.mode_id
    )
    with store.transaction(write=False) as conn:
        return [_mode_row(r) for r in conn.execute(query)]


def latest_runs(store: Store, assistant: str | None, unit: str = TURN) -> list[dict[str, Any]]:
    """The newest run row of ``unit`` of each assistant (or of ``assistant``)."""
    newer = sa.alias(failure_mode_runs, "newer")
    superseded = (
        sa.select(newer.c.id)
        .where(
            newer.c.assistant == failure_mode_runs.c.assistant,
            newer.c.unit == failure_mode_runs.c.unit,
            newer.c.id > failure_mode_runs.c.id,
        )
        .exists()
    )
    query = sa.select(failure_mode_runs).where(~superseded, failure_mode_runs.c.unit == unit)
    if assistant is not None:
        query = query.where(failure_mode_runs.c.assistant == assistant)
    with store.transaction(write=False) as conn:
        return [
            dict(r._mapping) for r in conn.execute(query.order_by(failure_mode_runs.c.assistant))
        ]


def get_mode(store: Store, mode_id: str) -> ModeRow | None:
    query = sa.select(failure_modes).where(failure_modes.c.mode_id == mode_id)
    with store.transaction(write=False) as conn:
        row = conn.execute(query).first()
    return None if row is None else _mode_row(row)


def mode_turns(store: Store, assistant: str, mode_id: str, *, limit: int) -> list[FailedTurn]:
    """The turns the newest run put in the mode, newest first, with their reasons."""
    members = (
        sa.select(failure_mode_members.c.event_id)
        .where(_members_of(assistant, TURN), failure_mode_members.c.mode_id == mode_id)
        .order_by(failure_mode_members.c.event_timestamp.desc())
        .limit(limit)
        .subquery()
    )
    query = (
        sa.select(
            verdicts.c.id,
            turns.c.event_id,
            turns.c.event_timestamp,
            turns.c.event["query"].as_string().label("query"),
            verdicts.c.metric_bands,
            verdicts.c.turn_band,
            judgments.c.scores,
        )
        .select_from(
            members.join(turns, turns.c.event_id == members.c.event_id)
            .join(verdicts, verdicts.c.event_id == turns.c.event_id)
            .outerjoin(judgments, judgments.c.verdict_id == verdicts.c.id)
        )
        .where(_newest_verdict())
        .order_by(turns.c.event_timestamp.desc(), verdicts.c.id.desc())
    )
    out: list[FailedTurn] = []
    with store.transaction(write=False) as conn:
        current: Any = None
        docs: list[Any] = []
        for row in conn.execute(query):
            if current is not None and row.id != current.id:
                out.append(_turn(current, docs))
                docs = []
            current = row
            docs.append(row.scores)
        if current is not None:
            out.append(_turn(current, docs))
    return out


def mode_cases(store: Store, assistant: str, mode_id: str, *, limit: int) -> list[FailedTurn]:
    """The cases the newest run put in a case mode, newest first, with the case judge's
    reasons (each keyed by its conversation id; its newest verdict, as grouped)."""
    members = (
        sa.select(failure_mode_members.c.event_id)
        .where(_members_of(assistant, CASE), failure_mode_members.c.mode_id == mode_id)
        .order_by(failure_mode_members.c.event_timestamp.desc())
        .limit(limit)
        .subquery()
    )
    ids = (
        sa.select(case_verdicts.c.id)
        .join(members, members.c.event_id == case_verdicts.c.conversation_id)
        .where(case_verdicts.c.assistant_name == assistant, _newest_case())
        .subquery()
    )
    with store.transaction(write=False) as conn:
        return list(_grouped_rows(conn.execute(_case_rows(ids))))


# ------------------------------------------------- the modes since a detector's change point

# A mode id as a number, for a gauge's value (an id never goes in a label): its ten hex
# digits read as an integer, plus 2**40 per kind after the first, so every number stays below
# 2**53 and a float64 (Prometheus' value) holds it exactly. ``inspect failure`` takes either.
_ID_KINDS = ("fm-", "fc-")  # turns' modes, cases' modes
_ID_SPAN = 1 << 40


def mode_number(mode_id: str) -> int:
    """``mode_id`` as the number the alert's annotations print."""
    kind = _ID_KINDS.index(mode_id[:3])
    return kind * _ID_SPAN + int(mode_id[3:], 16)


def mode_id_of(text: str) -> str:
    """A mode id as a person typed it: the id itself, or its number (``mode_number``)."""
    if not text.isdigit():
        return text
    kind, digits = divmod(int(text), _ID_SPAN)
    if kind >= len(_ID_KINDS):
        return text
    return f"{_ID_KINDS[kind]}{digits:010x}"


@dataclass(frozen=True)
class ModesSince:
    """The modes of an assistant's failed turns since a point in time, largest first: what
    the newest grouping run put in each mode among the turns since ``since``."""

    assistant: str
    since: datetime
    grouped_at: datetime | None  # the newest grouping run (None: none stored)
    failed: int  # failed turns from ``since`` to ``grouped_at``
    modes: tuple[tuple[ModeRow, int], ...]  # each mode and its turns since, largest first

    def share(self, turns: int) -> float:
        return turns / max(self.failed, sum(n for _, n in self.modes), 1)


def newest_grouping(store: Store, assistant: str) -> tuple[int, datetime] | None:
    """The id and time of ``assistant``'s newest grouping run of turns, whatever it found
    (None: none); its members are the only ones stored."""
    query = (
        sa.select(failure_mode_runs.c.id, failure_mode_runs.c.run_at)
        .where(failure_mode_runs.c.assistant == assistant, failure_mode_runs.c.unit == TURN)
        .order_by(failure_mode_runs.c.id.desc())
        .limit(1)
    )
    with store.transaction(write=False) as conn:
        row = conn.execute(query).first()
    return None if row is None else (int(row.id), row.run_at)


def modes_since(store: Store, assistant: str, since: datetime, *, limit: int) -> ModesSince:
    """The ``limit`` largest modes among ``assistant``'s failed turns since ``since``, as the
    newest grouping run found them (its members), with the failed turns since then up to that
    run: a turn failed after the run is in no mode yet and counts in neither."""
    newest = newest_grouping(store, assistant)
    if newest is None:
        return ModesSince(assistant, since, None, 0, ())
    grouped_at = newest[1]
    members = failure_mode_members
    turns_since = sa.func.count().label("turns_since")
    counts = (
        sa.select(members.c.mode_id, turns_since)
        .where(_members_of(assistant, TURN), members.c.event_timestamp >= since)
        .group_by(members.c.mode_id)
        .order_by(turns_since.desc(), members.c.mode_id)
        .limit(limit)
    )
    with store.transaction(write=False) as conn:
        ranked = [(str(r.mode_id), int(r.turns_since)) for r in conn.execute(counts)]
        ids = [mode_id for mode_id, _ in ranked]
        rows = {
            r.mode_id: _mode_row(r)
            for r in conn.execute(
                sa.select(failure_modes).where(
                    failure_modes.c.assistant == assistant,
                    failure_modes.c.unit == TURN,
                    failure_modes.c.mode_id.in_(ids),
                )
            )
        }
    failed = count_failed(store, assistant, since, grouped_at) if since < grouped_at else 0
    modes = tuple((rows[m], n) for m, n in ranked if m in rows)
    return ModesSince(assistant, since, grouped_at, failed, modes)
