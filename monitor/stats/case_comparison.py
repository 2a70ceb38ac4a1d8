"""Compare two assistants on the cases both answered, with case scores as the unit (pure).

The conversation-level comparison of ``monitor.stats.comparison`` with the case judge's scores
instead of the mean of turn scores: each case (an assistant's side of a conversation) is scored
once, as a whole, by its current case verdict, and A and B are paired by ``conversation_id``
(an A/B deployment answers the same conversation ids with two assistants). Primary test: paired
two-sided Wilcoxon signed-rank on the case score; paired t-test and a bootstrap CI of the mean
difference beside it; per case metric and on "resolved" (1 when the case judge found the case
resolved), Wilcoxon only. Every difference is **B − A**: positive means B scores higher.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from monitor.schema.case import CASE_METRICS
from monitor.stats.comparison import MetricComparison
from monitor.stats.paired import BOOTSTRAP_SEED, PairedTest, paired_test


@dataclass(frozen=True)
class CaseScore:
    """One case's current verdict, as the comparison reads it."""

    conversation_id: str
    case_score: float
    metric_scores: Mapping[str, float]
    outcome: str | None
    judge_config_hash: str = ""


@dataclass(frozen=True)
class CaseComparison:
    assistant_a: str
    assistant_b: str
    cases_a: int
    cases_b: int
    only_a: int
    only_b: int
    case_score: PairedTest
    resolved: PairedTest
    metrics: tuple[MetricComparison, ...]
    notes: tuple[str, ...]

    @property
    def n_pairs(self) -> int:
        return self.case_score.n

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["n_pairs"] = self.n_pairs
        doc["unit"] = "case"
        doc["delta"] = "B - A"
        doc["metrics"] = {m.metric: asdict(m.test) for m in self.metrics}
        return doc


def compare_cases(
    assistant_a: str,
    a_cases: Iterable[CaseScore],
    assistant_b: str,
    b_cases: Iterable[CaseScore],
    *,
    confidence: float = 0.95,
    seed: int = BOOTSTRAP_SEED,
) -> CaseComparison:
    """Compare B's cases against A's on the conversations both answered."""
    a = {c.conversation_id: c for c in a_cases}
    b = {c.conversation_id: c for c in b_cases}
    shared = sorted(set(a) & set(b))
    notes: list[str] = []
    hashes_a = {c.judge_config_hash for c in a.values() if c.judge_config_hash}
    hashes_b = {c.judge_config_hash for c in b.values() if c.judge_config_hash}
    if hashes_a and hashes_b and hashes_a != hashes_b:
        notes.append(
            "A's and B's cases were judged with different case judge configurations "
            f"({', '.join(sorted(hashes_a))} vs {', '.join(sorted(hashes_b))}): "
            "the difference mixes judge and assistant effects"
        )
    if not shared:
        notes.append("no conversation has a scored case on both sides: nothing to compare")
    score = paired_test(
        [a[c].case_score for c in shared],
        [b[c].case_score for c in shared],
        confidence=confidence,
        seed=seed,
    )
    resolved = paired_test(
        [float(a[c].outcome == "resolved") for c in shared],
        [float(b[c].outcome == "resolved") for c in shared],
        with_t=False,
        with_ci=False,
    )
    metrics = []
    for m in CASE_METRICS:
        both = [c for c in shared if m in a[c].metric_scores and m in b[c].metric_scores]
        test = paired_test(
            [a[c].metric_scores[m] for c in both],
            [b[c].metric_scores[m] for c in both],
            with_t=False,
            with_ci=False,
        )
        metrics.append(MetricComparison(m, test))
    return CaseComparison(
        assistant_a=assistant_a,
        assistant_b=assistant_b,
        cases_a=len(a),
        cases_b=len(b),
        only_a=len(set(a) - set(shared)),
        only_b=len(set(b) - set(shared)),
        case_score=score,
        resolved=resolved,
        metrics=tuple(metrics),
        notes=tuple(notes),
    )
