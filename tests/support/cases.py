"""What the case tests share: conversations stored as the stream stores judged turns, a case
judge reply, and a case job built on a store."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry

from monitor.config.cases import CasesConfig
from monitor.jobs.cases import CaseJob
from monitor.jobs.recorders import CaseRecorder
from monitor.judging.case_judge import CaseJudge
from monitor.judging.case_panel import CasePanel
from monitor.judging.verdicts import scored_verdict
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.sampling.budget import HourlyBudget
from monitor.schema.case import CASE_METRICS, Case, CaseTurn
from monitor.schema.turn import METRICS, JudgeScores, Judgment, TurnEvent
from monitor.scoring.turn import BUILTIN_PROFILES, DEFAULT_CRITICAL_METRICS
from monitor.storage.store import Store

ASSISTANT = "helpdesk"
CASE = {
    "subject": "VPN drops with error 0x80070005 after update",
    "description": "Since the 2.4.1 client update the VPN disconnects every few minutes.",
}


def turn(
    conversation: str,
    index: int,
    *,
    assistant: str = ASSISTANT,
    query: str = "The VPN still drops after the update. What should I do?",
    answer: str = "Reinstall the VPN client 2.4.1 driver, then reconnect.",
    ends_case: bool = False,
    history: Sequence[Mapping[str, str]] = (),
) -> TurnEvent:
    return TurnEvent.model_validate(
        {
            "event_id": f"{assistant}-{conversation}-{index}",
            "conversation_id": conversation,
            "turn_index": index,
            "timestamp": datetime(2026, 3, 1, 10, index, tzinfo=UTC).isoformat(),
            "assistant": {"name": assistant, "version": "1", "model": "m"},
            "case": CASE,
            "history": list(history),
            "query": query,
            "contexts": [{"id": "kb-1", "text": "Reinstall the VPN client 2.4.1 driver."}],
            "answer": answer,
            "ends_case": ends_case,
        }
    )


def _judgment(score: float) -> Judgment:
    scores = JudgeScores.model_validate(
        {m: {"score": score, "justification": "fine"} for m in METRICS}
    )
    return Judgment(judge="heuristic", kind="heuristic", model="h", status="ok", scores=scores)


def store_turn(store: Store, event: TurnEvent, *, score: float = 0.9) -> None:
    """``event`` stored with a verdict, as the stream's store step stores a judged turn."""
    verdict = scored_verdict(
        event,
        {m: score for m in METRICS},
        [_judgment(score)],
        weights=BUILTIN_PROFILES["default"],
        weight_profile="default",
        critical=DEFAULT_CRITICAL_METRICS,
        judge_config_hash="cfg",
    )
    assert store.save(event, verdict)


def case_of(*events: TurnEvent, turns_cut: int = 0) -> Case:
    at = datetime(2026, 3, 1, tzinfo=UTC)
    return Case(
        events[0].assistant.name,
        events[0].conversation_id,
        tuple(CaseTurn(e, at + timedelta(seconds=i)) for i, e in enumerate(events)),
        turns_cut=turns_cut,
    )


def case_document(score: float = 0.9, outcome: str = "resolved") -> dict[str, Any]:
    doc: dict[str, Any] = {"resolution_outcome": outcome}
    doc.update({m: {"score": score, "justification": f"{m}: as scored"} for m in CASE_METRICS})
    return doc


def case_reply_text(score: float = 0.9, outcome: str = "resolved") -> str:
    return json.dumps(case_document(score, outcome))


def case_job(
    store: Store,
    judges: Sequence[CaseJudge],
    clock: ManualClock,
    *,
    arbiter: CaseJudge | None = None,
    budget: HourlyBudget | None = None,
    lease_owner: str | None = None,
    registry: CollectorRegistry | None = None,
    **config: Any,
) -> CaseJob:
    return CaseJob(
        CasesConfig(**config),
        CasePanel(judges, arbiter),
        "case-cfg",
        store,
        CaseRecorder(Metrics(registry or CollectorRegistry())),
        budget or HourlyBudget(None, None, 0.0, clock),
        clock=clock,
        lease_owner=lease_owner,
    )
