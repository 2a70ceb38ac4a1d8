"""Cases in SQL: which cases are due, their turns, and their verdicts written exactly once.

Open cases cost rows, not memory: nothing keeps a map of open conversations. A case is due
when a query over the stored turns says so (``due_cases``): its conversation has a turn stored
since ``since`` (the look-back window), and either

- it has turns its current verdict does not cover (none yet, more turns than it covered, or a
  turn stored after it) and it is closed: its newest turn is older than the idle cut-off, or
  a turn not yet covered says the case ended (``ends_case``); or
- its current verdict is ``judge_failed`` fewer than ``max_failures`` times in a row, and no
  turn came since (it is retried at the next run).

A verdict is written with the version the case had when it was found due (current + 1), in one
transaction that checks the job's lease first (``require_lease``); the unique constraint on
(conversation_id, version) is the last line: a second write of a version, by a replica whose
lease lapsed or a run replayed after a SIGKILL, inserts nothing and is reported as such.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from monitor.schema.case import Case, CaseJudgment, CaseTurn, CaseVerdict
from monitor.schema.turn import TurnEvent
from monitor.storage.leases import Fence, require_lease
from monitor.storage.store import Store
from monitor.storage.tables import case_judgments, case_verdicts, turns, verdicts

# The newest turns read for one case at most: a longer conversation is cut (oldest first)
# before the prompt is even built, and the verdict says how many were left out.
MAX_TURNS_READ = 500


@dataclass(frozen=True)
class DueCase:
    """A case to judge now: the version its verdict will take and why it closed."""

    assistant: str
    conversation_id: str
    version: int  # the version the verdict will take
    close_reason: str  # idle | ended
    failures_in_row: int  # judge_failed versions in a row before this one (0: none)
    retry: bool  # a failed verdict retried, no new turn since


def _current() -> Any:
    """Each conversation's current (newest) verdict."""
    newest = (
        sa.select(
            case_verdicts.c.assistant_name.label("aname"),
            case_verdicts.c.conversation_id.label("cid"),
            sa.func.max(case_verdicts.c.version).label("version"),
        )
        .group_by(case_verdicts.c.assistant_name, case_verdicts.c.conversation_id)
        .subquery("newest")
    )
    return (
        sa.select(
            case_verdicts.c.assistant_name,
            case_verdicts.c.conversation_id,
            case_verdicts.c.version,
            case_verdicts.c.status,
            case_verdicts.c.turns,
            case_verdicts.c.covered_until,
            case_verdicts.c.failures_in_row,
            case_verdicts.c.close_reason,
        )
        .join(
            newest,
            sa.and_(
                newest.c.aname == case_verdicts.c.assistant_name,
                newest.c.cid == case_verdicts.c.conversation_id,
                newest.c.version == case_verdicts.c.version,
            ),
        )
        .subquery("cur")
    )


def due_cases(
    store: Store,
    *,
    now: datetime,
    idle_cutoff: datetime,
    since: datetime,
    max_failures: int,
    limit: int,
) -> list[DueCase]:
    """Up to ``limit`` due cases, the longest quiet first (this module's docstring)."""
    recent = (
        sa.select(turns.c.conversation_id)
        .where(turns.c.stored_at > since, turns.c.stored_at <= now)
        .distinct()
    )
    ends = sa.case((turns.c.event["ends_case"].as_boolean(), turns.c.stored_at), else_=None)
    agg = (
        sa.select(
            turns.c.assistant_name,
            turns.c.conversation_id,
            sa.func.count().label("n"),
            sa.func.max(turns.c.stored_at).label("last_stored"),
            sa.func.max(ends).label("ended_at"),
        )
        .where(turns.c.conversation_id.in_(recent))
        .group_by(turns.c.assistant_name, turns.c.conversation_id)
        .subquery("agg")
    )
    cur = _current()
    uncovered = sa.or_(
        cur.c.version.is_(None),
        agg.c.n > cur.c.turns,
        agg.c.last_stored > cur.c.covered_until,
    )
    ended = sa.and_(
        agg.c.ended_at.is_not(None),
        sa.or_(cur.c.covered_until.is_(None), agg.c.ended_at > cur.c.covered_until),
    )
    closed = sa.or_(agg.c.last_stored <= idle_cutoff, ended)
    retry = sa.and_(
        cur.c.status == "judge_failed",
        cur.c.failures_in_row < max_failures,
        sa.not_(uncovered),
    )
    query = (
        sa.select(
            agg.c.assistant_name,
            agg.c.conversation_id,
            agg.c.ended_at,
            cur.c.version,
            cur.c.status,
            cur.c.covered_until,
            cur.c.failures_in_row,
            cur.c.close_reason,
            sa.and_(uncovered, closed).label("fresh"),
        )
        .select_from(
            agg.outerjoin(
                cur,
                sa.and_(
                    cur.c.assistant_name == agg.c.assistant_name,
                    cur.c.conversation_id == agg.c.conversation_id,
                ),
            )
        )
        .where(sa.or_(sa.and_(uncovered, closed), retry))
        .order_by(agg.c.last_stored, agg.c.assistant_name, agg.c.conversation_id)
        .limit(limit)
    )
    with store.transaction(write=False, action="finding cases to close") as conn:
        rows = conn.execute(query).all()
    out = []
    for row in rows:
        failed_before = row.status == "judge_failed"
        fresh = bool(row.fresh)
        if fresh:
            is_ended = row.ended_at is not None and (
                row.covered_until is None or row.ended_at > row.covered_until
            )
            reason = "ended" if is_ended else "idle"
        else:
            reason = str(row.close_reason)
        out.append(
            DueCase(
                assistant=row.assistant_name,
                conversation_id=row.conversation_id,
                version=(row.version or 0) + 1,
                close_reason=reason,
                failures_in_row=int(row.failures_in_row or 0) if failed_before else 0,
                retry=not fresh,
            )
        )
    return out


@dataclass(frozen=True)
class StoredCase:
    """A case's stored turns, newest ``MAX_TURNS_READ`` at most, and what they add up to."""

    case: Case
    total_turns: int
    covered_until: datetime
    turn_s_finals: list[float | None]


def read_case(store: Store, assistant: str, conversation_id: str) -> StoredCase | None:
    """The turns of one conversation in conversation order (turn index, then event time,
    then arrival: out-of-order arrival does not reorder a case), the oldest beyond
    ``MAX_TURNS_READ`` left out and counted in ``turns_cut``. None: no turn is stored."""
    judged = verdicts.alias("judged")
    newest_verdict = (
        sa.select(sa.func.max(judged.c.id))
        .where(judged.c.event_id == turns.c.event_id, judged.c.status == "ok")
        .correlate(turns)
        .scalar_subquery()
    )
    s_final = (
        sa.select(verdicts.c.s_final)
        .where(verdicts.c.id == newest_verdict)
        .correlate(turns)
        .scalar_subquery()
    )
    where = sa.and_(turns.c.assistant_name == assistant, turns.c.conversation_id == conversation_id)
    query = (
        sa.select(turns.c.event, turns.c.stored_at, s_final.label("s_final"))
        .where(where)
        .order_by(
            turns.c.turn_index.desc(), turns.c.event_timestamp.desc(), turns.c.stored_at.desc()
        )
        .limit(MAX_TURNS_READ)
    )
    with store.transaction(write=False, action="reading a case") as conn:
        total = conn.execute(sa.select(sa.func.count()).where(where)).scalar_one()
        newest = conn.execute(sa.select(sa.func.max(turns.c.stored_at)).where(where)).scalar()
        rows = list(reversed(conn.execute(query).all()))
    if not rows or newest is None:
        return None
    case_turns = tuple(CaseTurn(TurnEvent.model_validate(row.event), row.stored_at) for row in rows)
    return StoredCase(
        case=Case(assistant, conversation_id, case_turns, turns_cut=int(total) - len(rows)),
        total_turns=int(total),
        covered_until=newest,
        turn_s_finals=[row.s_final for row in rows],
    )


def _verdict_row(verdict: CaseVerdict, judged_at: datetime) -> dict[str, Any]:
    return {
        "conversation_id": verdict.conversation_id,
        "version": verdict.version,
        "assistant_name": verdict.assistant,
        "status": verdict.status,
        "failure_reason": verdict.failure_reason,
        "failures_in_row": verdict.failures_in_row,
        "close_reason": verdict.close_reason,
        "judge_config_hash": verdict.judge_config_hash,
        "turns": verdict.turns,
        "turns_cut": verdict.turns_cut,
        "covered_until": verdict.covered_until,
        "case_score": verdict.case_score,
        "case_band": str(verdict.case_band) if verdict.case_band else None,
        "resolution_outcome": verdict.resolution_outcome,
        "metric_scores": dict(verdict.metric_scores),
        "metric_bands": {m: str(b) for m, b in verdict.metric_bands.items()},
        "turn_mean_s_final": verdict.turn_mean_s_final,
        "arbitrated": verdict.arbitrated,
        "arbitration_trigger": verdict.arbitration_trigger,
        "judged_at": judged_at,
    }


def _judgment_row(judgment: CaseJudgment, verdict_id: int) -> dict[str, Any]:
    return {
        "case_verdict_id": verdict_id,
        "judge": judgment.judge,
        "kind": judgment.kind,
        "model": judgment.model,
        "role": judgment.role,
        "status": judgment.status,
        "failure_reason": judgment.failure_reason,
        "failure_detail": judgment.failure_detail,
        "scores": judgment.scores.model_dump(mode="json") if judgment.scores else None,
        "raw_output": judgment.raw_output,
        "prompt_version": judgment.prompt_version,
        "prompt_hash": judgment.prompt_hash,
        "attempts": judgment.attempts,
        "input_tokens": judgment.input_tokens,
        "output_tokens": judgment.output_tokens,
        "cost_usd": judgment.cost_usd,
        "latency_seconds": judgment.latency_seconds,
    }


def save_case_verdict(
    store: Store, verdict: CaseVerdict, judged_at: datetime, *, fence: Fence | None
) -> bool:
    """Write ``verdict`` and its judgments in one transaction; False when its version was
    written before (nothing is written then). With ``fence``, raises ``LeaseLost`` (writing
    nothing) unless the fence's owner holds the job's lease."""
    insert = store.upsert(
        case_verdicts,
        ["assistant_name", "conversation_id", "version"],
        values=_verdict_row(verdict, judged_at),
    ).returning(case_verdicts.c.id)
    with store.transaction(write=True, action="saving a case verdict") as conn:
        if fence is not None:
            require_lease(conn, fence.job, fence.owner, fence.at)
        verdict_id = conn.execute(insert).scalar()
        if verdict_id is None:
            return False
        rows = [_judgment_row(j, int(verdict_id)) for j in verdict.judgments]
        if rows:
            conn.execute(sa.insert(case_judgments), rows)
    return True


def case_history(store: Store, conversation_id: str) -> list[dict[str, Any]]:
    """Every verdict of a conversation's cases (one per assistant that answered in it), by
    assistant then version, each with its judgments."""
    with store.transaction(write=False, action="reading case verdicts") as conn:
        rows = [
            dict(r._mapping)
            for r in conn.execute(
                sa.select(case_verdicts)
                .where(case_verdicts.c.conversation_id == conversation_id)
                .order_by(case_verdicts.c.assistant_name, case_verdicts.c.version)
            )
        ]
        ids = [r["id"] for r in rows]
        judged: dict[int, list[dict[str, Any]]] = {i: [] for i in ids}
        if ids:
            for j in conn.execute(
                sa.select(case_judgments)
                .where(case_judgments.c.case_verdict_id.in_(ids))
                .order_by(case_judgments.c.id)
            ):
                judged[j.case_verdict_id].append(dict(j._mapping))
    for row in rows:
        row["judgments"] = judged[row["id"]]
    return rows


def case_turns(store: Store, conversation_id: str) -> list[dict[str, Any]]:
    """Every stored turn of a conversation, by assistant then conversation order, each with
    its newest verdict's status, bands and S_final (None when it has none)."""
    judged = verdicts.alias("judged")
    newest = (
        sa.select(sa.func.max(judged.c.id))
        .where(judged.c.event_id == turns.c.event_id)
        .correlate(turns)
        .scalar_subquery()
    )
    query = (
        sa.select(
            turns.c.event_id,
            turns.c.assistant_name,
            turns.c.turn_index,
            turns.c.event,
            turns.c.stored_at,
            verdicts.c.status,
            verdicts.c.failure_reason,
            verdicts.c.s_final,
            verdicts.c.turn_band,
            verdicts.c.metric_bands,
        )
        .select_from(turns.outerjoin(verdicts, verdicts.c.id == newest))
        .where(turns.c.conversation_id == conversation_id)
        .order_by(
            turns.c.assistant_name,
            turns.c.turn_index,
            turns.c.event_timestamp,
            turns.c.stored_at,
        )
        .limit(MAX_TURNS_READ)
    )
    with store.transaction(write=False, action="reading a case's turns") as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def newest_case(store: Store, assistant: str | None, *, band: str | None = None) -> str | None:
    """The conversation of the newest case verdict (of ``assistant``, in ``band``), if any."""
    query = sa.select(case_verdicts.c.conversation_id).order_by(
        case_verdicts.c.judged_at.desc(), case_verdicts.c.id.desc()
    )
    if assistant is not None:
        query = query.where(case_verdicts.c.assistant_name == assistant)
    if band is not None:
        query = query.where(case_verdicts.c.case_band == band)
    with store.transaction(write=False, action="reading case verdicts") as conn:
        found = conn.execute(query.limit(1)).scalar()
    return None if found is None else str(found)
