"""Case verdicts stored directly (as the case job writes them), for tests of what reads them:
case labels, case signals for detectors and drift, and comparisons on case scores."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import sqlalchemy as sa

from monitor.runtime.clock import ManualClock
from monitor.schema.case import CASE_METRICS, CaseVerdict
from monitor.scoring.case import case_band, case_score, metric_bands
from monitor.storage import case_queries
from monitor.storage.store import Store
from monitor.storage.tables import case_verdicts
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


class CaseFeed:
    """Stores ok case verdicts of assistants (severe and unresolved with probability ``p``),
    judged at the shared manual clock's time, in one transaction per call."""

    def __init__(self, store: Store, clock: ManualClock, seed: int = 1) -> None:
        self.store, self.clock = store, clock
        self.rng = np.random.default_rng(seed)
        self.n = 0

    def cases(
        self, assistant: str, count: int, p: float, *, at: datetime | None = None
    ) -> list[int]:
        when = at or datetime.fromtimestamp(self.clock.time(), tz=UTC)
        rows = []
        for x in self.rng.random(count) < p:
            self.n += 1
            score = 0.1 if x else 0.95
            outcome = "unresolved" if x else "resolved"
            scores = {m: score for m in CASE_METRICS}
            rows.append(
                {
                    "conversation_id": f"{assistant}-conv-{self.n}",
                    "version": 1,
                    "assistant_name": assistant,
                    "status": "ok",
                    "failure_reason": None,
                    "failures_in_row": 0,
                    "close_reason": "idle",
                    "judge_config_hash": "case-cfg",
                    "turns": 2,
                    "turns_cut": 0,
                    "covered_until": when,
                    "case_score": case_score(scores),
                    "case_band": str(case_band(scores, outcome)),
                    "resolution_outcome": outcome,
                    "metric_scores": scores,
                    "metric_bands": {m: str(b) for m, b in metric_bands(scores).items()},
                    "turn_mean_s_final": None,
                    "arbitrated": False,
                    "arbitration_trigger": None,
                    "judged_at": when,
                }
            )
        with self.store.transaction(write=True) as conn:
            result = conn.execute(sa.insert(case_verdicts).returning(case_verdicts.c.id), rows)
            return [int(i) for i in result.scalars()]
