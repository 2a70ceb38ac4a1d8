"""Case scoring: the weighted case score, the metric bands and the case band rule (pure).

The Case-Aware paper scores turns; it reports conversation-level results by aggregating a
conversation's turn scores (its §7.1), and names as the failure modes generic metrics miss
"case misidentification, workflow misalignment, and partial resolution across turns". The case
metrics score those across the whole conversation, with the paper's bands (appendix B: severe
0.00-0.30, moderate 0.31-0.60, minor 0.61-0.85, none 0.86-1.00) and its S_final form (Eq. 1,
a weighted sum), so a case score reads like a turn score:

- ``case_score`` = sum of ``CASE_WEIGHTS[m] * s_m`` over the five case metrics;
- the **case band** is the worst of: the band of ``case_score``, the band of each critical
  case metric (``resolution`` and ``consistency``: an unresolved case or a changed identifier
  is never averaged away, as the turn band rule does for its critical metrics), and the cap of
  the outcome: an ``unresolved`` case is at best ``moderate``, a ``partial`` one at best
  ``minor`` (the paper's "partial resolution across turns" is a failure, not a pass).
  ``resolved`` and ``handed_off`` (a person took the case over, as a workflow may require)
  cap nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from monitor.schema.case import CASE_METRICS
from monitor.schema.turn import Band
from monitor.scoring.turn import band, worst

# Resolution weighs most: it is what a support team answers for.
CASE_WEIGHTS: dict[str, float] = {
    "resolution": 0.30,
    "issue_tracking": 0.20,
    "workflow_alignment": 0.20,
    "consistency": 0.15,
    "customer_effort": 0.15,
}
CASE_CRITICAL: tuple[str, ...] = ("resolution", "consistency")
OUTCOME_CAPS: dict[str, Band] = {"unresolved": Band.MODERATE, "partial": Band.MINOR}


def _check(scores: Mapping[str, float]) -> None:
    missing = [m for m in CASE_METRICS if m not in scores]
    if missing:
        raise ValueError(f"case scores missing metric(s): {', '.join(missing)}")


def case_score(scores: Mapping[str, float]) -> float:
    """The weighted case score in [0, 1] (the paper's Eq. 1 over the case metrics)."""
    _check(scores)
    value = math.fsum(CASE_WEIGHTS[m] * scores[m] for m in CASE_METRICS)
    return min(1.0, max(0.0, value))


def metric_bands(scores: Mapping[str, float]) -> dict[str, Band]:
    _check(scores)
    return {m: band(scores[m]) for m in CASE_METRICS}


def case_band(scores: Mapping[str, float], outcome: str) -> Band:
    """The case band rule of this module's docstring."""
    candidates = [band(case_score(scores))]
    candidates.extend(band(scores[m]) for m in CASE_CRITICAL)
    cap = OUTCOME_CAPS.get(outcome)
    if cap is not None:
        candidates.append(cap)
    return worst(candidates)


def combine(scores: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Scores of several judges as one: the per-metric median (two judges: their mean)."""
    if not scores:
        raise ValueError("combine() of no scores")
    out: dict[str, float] = {}
    for m in CASE_METRICS:
        values = sorted(s[m] for s in scores)
        mid = len(values) // 2
        out[m] = values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2
    return out


def outcome_of(outcomes: Sequence[str]) -> str:
    """The outcome several judges give as one: the most common, ties to the worse one."""
    if not outcomes:
        raise ValueError("outcome_of() of no outcomes")
    order = ("unresolved", "partial", "handed_off", "resolved")  # worst first
    return max(order, key=lambda o: (outcomes.count(o), -order.index(o)))


def bands_differ(
    a: Mapping[str, float], a_outcome: str, b: Mapping[str, float], b_outcome: str
) -> bool:
    """Whether two judges disagree on a case: another case band or another outcome."""
    return a_outcome != b_outcome or case_band(a, a_outcome) != case_band(b, b_outcome)


def turn_mean(s_finals: Sequence[float | None]) -> float | None:
    """The paper's conversation-level aggregate: the mean S_final of the judged turns."""
    values = [v for v in s_finals if v is not None]
    return math.fsum(values) / len(values) if values else None
