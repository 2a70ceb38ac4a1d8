"""The offline pairwise judge: the deterministic heuristic judge scores each answer alone and
the higher weighted S_final wins (within ``margin`` it is a Tie).

It has no logprobs, so every decision is ``confidence = unknown``; it exists so that the
baseline-tier job, ``casewatch pairwise`` and the demo run without a judge endpoint, and is
labelled ``heuristic`` wherever its results appear. It is symmetric, so its position
disagreement is 0 by construction: that figure means something only for a real LLM judge.
"""

from __future__ import annotations

from datetime import UTC, datetime

from monitor.judging.heuristic.judge import score_turn
from monitor.judging.pairwise_judge import OrderJudgment, PairwiseJudgment, combine
from monitor.judging.pairwise_prompt import PairwiseAnswer, PairwiseQuestion
from monitor.judging.pairwise_scoring import Label, score_label
from monitor.schema.turn import Assistant, TurnEvent
from monitor.scoring import turn as scoring

DEFAULT_MARGIN = 0.02
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


class HeuristicPairwiseJudge:
    def __init__(
        self, name: str = "heuristic", *, swap: bool = True, margin: float = DEFAULT_MARGIN
    ) -> None:
        self._name = name
        self._swap = swap
        self._margin = margin
        self._weights = scoring.validate_weights(scoring.BUILTIN_PROFILES["default"])

    @property
    def name(self) -> str:
        return self._name

    def close(self) -> None:
        pass

    def s_final(self, question: PairwiseQuestion, answer: PairwiseAnswer) -> float:
        turn = TurnEvent(
            event_id="pairwise-probe",
            conversation_id="pairwise-probe",
            turn_index=len(question.history),
            timestamp=_EPOCH,
            assistant=Assistant(name="pairwise", version="0", model="heuristic"),
            case=question.case,
            history=question.history,
            query=question.query,
            contexts=answer.contexts if answer.contexts is not None else question.contexts,
            answer=answer.text,
            reference=question.reference,
        )
        return scoring.s_final(score_turn(turn).score_map(), self._weights)

    def compare(
        self, question: PairwiseQuestion, first: PairwiseAnswer, second: PairwiseAnswer
    ) -> PairwiseJudgment:
        s_first, s_second = self.s_final(question, first), self.s_final(question, second)
        forward = self._order(s_first, s_second)
        swapped = self._order(s_second, s_first) if self._swap else None
        return combine(self._name, "heuristic", forward, swapped)

    def _order(self, s_a: float, s_b: float) -> OrderJudgment:
        label: Label = "Tie"
        if s_a - s_b > self._margin:
            label = "A"
        elif s_b - s_a > self._margin:
            label = "B"
        score = score_label(label)
        return OrderJudgment(
            status="ok",
            analysis=f"heuristic S_final: A={s_a:.3f}, B={s_b:.3f}",
            decision=label,
            label=label,
            kind=score.kind,
            score_a=score.score_a,
            score_b=score.score_b,
            attempts=0,
        )


__all__ = ["DEFAULT_MARGIN", "HeuristicPairwiseJudge"]
