"""Compare two assistants judged on the same conversations (the Case-Aware paper's §8.3; pure,
no I/O).

Unit of analysis: the conversation (mean S_final over its scored turns), paired by
``conversation_id``, only conversations both sides scored. Primary test: paired two-sided
Wilcoxon signed-rank; robustness checks: paired t-test and a bootstrap 95% CI of the mean
difference. Every difference is **B − A**: positive means B scores higher.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from monitor.schema.turn import METRICS, Verdict
from monitor.stats.paired import BOOTSTRAP_SEED, PairedTest, by_conversation, paired_test


@dataclass(frozen=True)
class MetricComparison:
    """One metric, per-conversation means paired like S_final (Wilcoxon only)."""

    metric: str
    test: PairedTest


@dataclass(frozen=True)
class Comparison:
    assistants_a: tuple[str, ...]
    assistants_b: tuple[str, ...]
    conversations_a: int
    conversations_b: int
    only_a: int
    only_b: int
    turns_scored_a: int
    turns_scored_b: int
    judge_failed_a: int
    judge_failed_b: int
    weight_profile: str | None
    s_final: PairedTest
    metrics: tuple[MetricComparison, ...]
    notes: tuple[str, ...]

    @property
    def n_pairs(self) -> int:
        return self.s_final.n

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["n_pairs"] = self.n_pairs
        doc["delta"] = "B - A"
        doc["metrics"] = {m.metric: asdict(m.test) for m in self.metrics}
        return doc


def compare(
    a_verdicts: Iterable[Verdict],
    b_verdicts: Iterable[Verdict],
    weights: Mapping[str, float] | None = None,
    *,
    weight_profile: str | None = None,
    confidence: float = 0.95,
    seed: int = BOOTSTRAP_SEED,
) -> Comparison:
    """Compare B against A.

    ``weights`` recomputes S_final from the stored metric scores (compare under another
    profile without re-judging); None uses each verdict's own S_final.
    """
    a = by_conversation(a_verdicts, weights)
    b = by_conversation(b_verdicts, weights)
    shared = sorted(set(a.s_final) & set(b.s_final))
    notes: list[str] = []
    if a.config_hashes and b.config_hashes and set(a.config_hashes) != set(b.config_hashes):
        notes.append(
            "A and B were judged with different judge configurations "
            f"({', '.join(a.config_hashes)} vs {', '.join(b.config_hashes)}): "
            "the difference mixes judge and assistant effects"
        )
    if len(a.config_hashes) > 1 or len(b.config_hashes) > 1:
        notes.append("an input holds verdicts from more than one judge configuration")
    if not shared:
        notes.append("no conversation was scored on both sides: nothing to compare")
    s_test = paired_test(
        [a.s_final[c] for c in shared],
        [b.s_final[c] for c in shared],
        confidence=confidence,
        seed=seed,
    )
    metric_rows = []
    for m in METRICS:
        convs = [c for c in shared if c in a.metrics[m] and c in b.metrics[m]]
        test = paired_test(
            [a.metrics[m][c] for c in convs],
            [b.metrics[m][c] for c in convs],
            with_t=False,
            with_ci=False,
        )
        metric_rows.append(MetricComparison(m, test))
    return Comparison(
        assistants_a=a.assistants,
        assistants_b=b.assistants,
        conversations_a=len(a.s_final),
        conversations_b=len(b.s_final),
        only_a=len(set(a.s_final) - set(shared)),
        only_b=len(set(b.s_final) - set(shared)),
        turns_scored_a=a.turns_scored,
        turns_scored_b=b.turns_scored,
        judge_failed_a=a.turns_failed,
        judge_failed_b=b.turns_failed,
        weight_profile=weight_profile,
        s_final=s_test,
        metrics=tuple(metric_rows),
        notes=tuple(notes),
    )
