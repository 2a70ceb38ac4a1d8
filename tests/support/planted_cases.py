"""Failed cases with planted failure modes, stored as the case job stores them (a case verdict,
the case judge's answer with a justification per metric, and the conversation's turns), for the
failure-modes job's case tests.

Each planted mode fails case metrics of its own, for reasons worded as a case judge words them
with slots filled at random; every case ends ``unresolved``, so its case band is moderate at
best (severe when a critical case metric fails). ``store_fine_case`` stores a resolved case
that must never be grouped.
"""

from __future__ import annotations

import random
from datetime import datetime

from monitor.schema.case import CASE_METRICS, CaseJudgment, CaseScores, CaseVerdict
from monitor.scoring.case import case_band, case_score, metric_bands
from monitor.storage import case_queries
from monitor.storage.store import Store
from tests.support.cases import store_turn, turn

FAILED_SCORE = 0.1
FINE_SCORE = 0.95
PRODUCTS = ["VPN client", "mail gateway", "printer driver", "SSO portal", "backup agent"]
QUERIES = [
    "My {p} stopped working this morning, can you help?",
    "How do I set up the {p} on my new laptop?",
    "The {p} keeps asking me to sign in again.",
]

CASE_MODES: dict[str, dict[str, tuple[str, ...]]] = {
    "never escalated": {
        "workflow_alignment": (
            "The assistant never escalated the ticket to tier two although the {p} outage "
            "needed an engineer; the escalation step of the workflow was skipped.",
            "No escalation was opened for the {p} fault; the workflow requires a hand-over to "
            "tier two after the second failed fix.",
        ),
        "resolution": (
            "The case ends without escalation and the {p} still fails for the customer.",
        ),
    },
    "customer repeats details": {
        "customer_effort": (
            "The customer had to repeat the serial number {n} times because the assistant "
            "kept asking for details already given.",
            "Customer effort is high: the device serial was requested again {n} times.",
        ),
        "issue_tracking": (
            "The assistant lost track of the serial number and the earlier troubleshooting.",
        ),
    },
    "contradicting steps": {
        "consistency": (
            "The assistant first says to uninstall the {p}, then later says never to "
            "uninstall it; the advice contradicts itself.",
            "Contradictory instructions: turn {n} reverses the reinstall advice of the "
            "earlier turn about the {p}.",
        ),
    },
}


def _fill(text: str, rng: random.Random) -> str:
    return text.format(p=rng.choice(PRODUCTS), n=rng.randint(2, 5))


def _save(
    store: Store,
    assistant: str,
    conversation: str,
    query: str,
    scores: dict[str, float],
    reasons: dict[str, str],
    outcome: str,
    judged_at: datetime,
) -> CaseVerdict:
    store_turn(store, turn(conversation, 0, assistant=assistant, query=query))
    store_turn(store, turn(conversation, 1, assistant=assistant, query="Still broken."))
    parsed = CaseScores.model_validate(
        {"resolution_outcome": outcome}
        | {m: {"score": scores[m], "justification": reasons.get(m) or f"{m} is fine"}
           for m in CASE_METRICS}
    )  # fmt: skip
    judgment = CaseJudgment(
        judge="case-primary", kind="openai", model="judge-model", status="ok", scores=parsed
    )
    verdict = CaseVerdict(
        conversation_id=conversation,
        version=1,
        assistant=assistant,
        status="ok",
        close_reason="idle",
        turns=2,
        turns_cut=0,
        covered_until=judged_at,
        judge_config_hash="case-cfg",
        case_score=case_score(scores),
        case_band=case_band(scores, outcome),
        resolution_outcome=outcome,
        metric_scores=scores,
        metric_bands=metric_bands(scores),
        judgments=(judgment,),
    )
    assert case_queries.save_case_verdict(store, verdict, judged_at, fence=None)
    return verdict


def store_planted_case(
    store: Store,
    assistant: str,
    conversation: str,
    mode: str,
    rng: random.Random,
    judged_at: datetime,
) -> CaseVerdict:
    """One failed case of planted ``mode`` (a key of ``CASE_MODES``)."""
    reasons = {m: _fill(rng.choice(texts), rng) for m, texts in CASE_MODES[mode].items()}
    scores = {m: FAILED_SCORE if m in reasons else FINE_SCORE for m in CASE_METRICS}
    query = _fill(rng.choice(QUERIES), rng)
    return _save(store, assistant, conversation, query, scores, reasons, "unresolved", judged_at)


def store_fine_case(
    store: Store, assistant: str, conversation: str, judged_at: datetime
) -> CaseVerdict:
    scores = {m: FINE_SCORE for m in CASE_METRICS}
    return _save(store, assistant, conversation, "Thanks!", scores, {}, "resolved", judged_at)
