"""Planted failed turns (``planted_failures.py``) stored as real turns and verdicts: the
failing metrics scored 0.1 by the judge with the planted reason as its justification, the
others 0.95, so the failure-modes job reads them back from SQL as the daemon stores them."""

from __future__ import annotations

from collections.abc import Sequence

from monitor.judging.verdicts import scored_verdict
from monitor.schema.turn import METRICS, JudgeScores, Judgment, TurnEvent, Verdict
from monitor.scoring.turn import BUILTIN_PROFILES, DEFAULT_CRITICAL_METRICS
from monitor.stats.failure_features import FailedTurn
from monitor.storage.store import Store

WEIGHTS = BUILTIN_PROFILES["default"]
FAILED_SCORE = 0.1
FINE_SCORE = 0.95


def stored_pair(turn: FailedTurn, assistant: str) -> tuple[TurnEvent, Verdict]:
    event = TurnEvent.model_validate(
        {
            "event_id": turn.event_id,
            "conversation_id": f"conv-{turn.event_id}",
            "turn_index": 1,
            "timestamp": turn.at.isoformat(),
            "assistant": {"name": assistant, "version": "2.0", "model": "m"},
            "case": {"subject": "support", "description": turn.query[:200]},
            "history": [],
            "query": turn.query,
            "contexts": [{"id": "kb-1", "text": "Some article."}],
            "answer": "An answer.",
        }
    )
    final = {m: FAILED_SCORE if m in turn.failing else FINE_SCORE for m in METRICS}
    parsed = JudgeScores.model_validate(
        {m: {"score": final[m], "justification": turn.reasons.get(m) or f"{m} is fine"}
         for m in METRICS}
    )  # fmt: skip
    judgment = Judgment(
        judge="primary", kind="openai", model="judge-model", role="single", status="ok",
        scores=parsed, raw_output=parsed.model_dump_json(), prompt_version="v1",
        prompt_hash="abc",
    )  # fmt: skip
    verdict = scored_verdict(
        event, final, [judgment], weights=WEIGHTS, weight_profile="default",
        critical=DEFAULT_CRITICAL_METRICS, judge_config_hash="cfg",
    )  # fmt: skip
    return event, verdict


def store_failed(store: Store, turns: Sequence[FailedTurn], assistant: str) -> None:
    pairs = [stored_pair(t, assistant) for t in turns]
    for i in range(0, len(pairs), 500):
        store.save_many(pairs[i : i + 500])
