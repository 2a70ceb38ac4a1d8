"""Case verdicts stored directly (as the case job writes them), for tests of what reads them:
case labels, case signals for detectors and drift, and comparisons on case scores."""

from __future__ import annotations

from datetime import UTC, datetime

from monitor.case_models import CASE_METRICS, CaseVerdict
from monitor.case_scoring import case_band, case_score, metric_bands
from monitor.storage import case_queries
from monitor.storage.store import Store
from tests.support.cases import ASSISTANT, store_turn, turn

JUDGED = datetime(2026, 3, 1, 12, tzinfo=UTC)


def store_case(
    store: Store,
    conversation: str,
    *,
    score: float = 0.9,
    outcome: str = "resolved",
    version: int = 1,
    assistant: str = ASSISTANT,
    judged_at: datetime = JUDGED,
    turns: int = 2,
    with_turns: bool = True,
) -> CaseVerdict:
    """``turns`` turns of ``conversation`` stored (when ``with_turns``) and a case verdict of
    ``version`` whose five metrics all score ``score``."""
    if with_turns:
        for i in range(turns):
            store_turn(store, turn(conversation, i, assistant=assistant))
    scores = {m: score for m in CASE_METRICS}
    verdict = CaseVerdict(
        conversation_id=conversation,
        version=version,
        assistant=assistant,
        status="ok",
        close_reason="idle",
        turns=turns,
        turns_cut=0,
        covered_until=datetime.now(UTC),  # after the turns just stored
        judge_config_hash="case-cfg",
        case_score=case_score(scores),
        case_band=case_band(scores, outcome),
        resolution_outcome=outcome,
        metric_scores=scores,
        metric_bands=metric_bands(scores),
    )
    assert case_queries.save_case_verdict(store, verdict, judged_at, fence=None)
    return verdict
