"""Totals of a set of pairwise judgments (``casewatch pairwise``), pure.

Win rate = mean pairwise score of the first system over the judged questions (a Tie counts
half, soft scores count as they are). Its 95 % interval is a percentile bootstrap over the
questions (``scipy.stats.bootstrap``); with fewer than two judged questions there is none.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from monitor.judging.pairwise_judge import PairwiseJudgment
from monitor.stats.lazy import LazyModule

st = LazyModule("scipy.stats")  # imported on first use: see monitor.stats.lazy


@dataclass(frozen=True)
class PairwiseItem:
    question_id: str
    judgment: PairwiseJudgment


@dataclass
class PairwiseSummary:
    questions: int
    outcomes: Counter[str] = field(default_factory=Counter)  # win | tie | loss | failed
    failure_reasons: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)  # hard | soft | unknown per order
    win_rate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    position_disagreement: float | None = None
    label_flip_rate: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "questions": self.questions,
            "outcomes": {k: self.outcomes[k] for k in ("win", "tie", "loss", "failed")},
            "failure_reasons": dict(self.failure_reasons),
            "confidence": dict(self.kinds),
            "win_rate": self.win_rate,
            "win_rate_ci95": [self.ci_low, self.ci_high] if self.ci_low is not None else None,
            "position_disagreement": self.position_disagreement,
            "label_flip_rate": self.label_flip_rate,
        }


def summarise(
    items: Sequence[PairwiseItem], *, resamples: int = 2000, seed: int = 0
) -> PairwiseSummary:
    summary = PairwiseSummary(questions=len(items))
    scores: list[float] = []
    gaps: list[float] = []
    flips: list[bool] = []
    for item in items:
        j = item.judgment
        summary.kinds.update(j.kinds)
        if not j.ok or j.score_first is None or j.outcome is None:
            summary.outcomes["failed"] += 1
            summary.failure_reasons[j.failure_reason or "unknown"] += 1
            continue
        summary.outcomes[j.outcome] += 1
        scores.append(j.score_first)
        if j.disagreement is not None:
            gaps.append(j.disagreement)
            flips.append(bool(j.label_flipped))
    if scores:
        summary.win_rate = float(np.mean(scores))
    if len(set(scores)) > 1:
        result = st.bootstrap(
            (np.asarray(scores),),
            np.mean,
            confidence_level=0.95,
            n_resamples=resamples,
            method="percentile",
            random_state=np.random.default_rng(seed),
        )
        summary.ci_low = float(result.confidence_interval.low)
        summary.ci_high = float(result.confidence_interval.high)
    elif len(scores) > 1:  # every question scored the same: the interval is that point
        summary.ci_low = summary.ci_high = scores[0]
    if gaps:
        summary.position_disagreement = float(np.mean(gaps))
        summary.label_flip_rate = sum(flips) / len(flips)
    return summary


__all__ = ["PairwiseItem", "PairwiseSummary", "summarise"]
