"""DAFE arbitration rules: when two primary judges disagree, and how scores combine.

Pure functions over per-metric score maps (metric → score in [0, 1]); no I/O, no judges.
The panel (``monitor.judging.panel``) calls these; the report
(``monitor.reports.panel_report``) re-reads them.

Disagreement rules (``PanelConfig.disagreement``):

- ``any_band`` (default): some metric falls in a different severity band for the two judges.
- ``critical_band``: a critical metric (hallucination, identifier_integrity,
  resolution_alignment by default) falls in a different band; other metrics may differ.
- ``s_final_delta``: |S_final(a) − S_final(b)| > threshold.

Triggers recorded on the Verdict: ``band:<metric>`` when exactly one metric's band differs,
else the rule name (``any_band``/``critical_band``; the differing metrics are in
``Disagreement.metrics``), ``s_final_delta``, and ``primary_failed`` (set by the panel).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from monitor.schema.turn import METRICS
from monitor.scoring import turn as scoring

Rule = Literal["any_band", "critical_band", "s_final_delta"]
Side = Literal["primary_a", "primary_b", "neither", "both"]

RULES: tuple[str, ...] = ("any_band", "critical_band", "s_final_delta")
SIDES: tuple[str, ...] = ("primary_a", "primary_b", "neither", "both")
PRIMARY_FAILED = "primary_failed"


@dataclass(frozen=True)
class Disagreement:
    """Whether the primaries disagree under a rule, why, and on which metrics' bands."""

    disagree: bool
    trigger: str | None
    # Metrics whose bands differ and that the rule looks at (for s_final_delta: every metric
    # whose band differs, so per-metric disagreement counters stay meaningful). Empty on
    # agreement.
    metrics: tuple[str, ...] = ()


AGREE = Disagreement(disagree=False, trigger=None, metrics=())


def _check(scores: Mapping[str, float], who: str) -> None:
    missing = [m for m in METRICS if m not in scores]
    if missing:
        raise ValueError(f"{who} scores are missing metric(s): {', '.join(missing)}")


def band_differences(a: Mapping[str, float], b: Mapping[str, float]) -> tuple[str, ...]:
    """Metrics (in METRICS order) whose severity band differs between a and b."""
    _check(a, "first")
    _check(b, "second")
    return tuple(m for m in METRICS if scoring.band(a[m]) != scoring.band(b[m]))


def _band_trigger(rule: str, metrics: tuple[str, ...]) -> Disagreement:
    if not metrics:
        return AGREE
    trigger = f"band:{metrics[0]}" if len(metrics) == 1 else rule
    return Disagreement(disagree=True, trigger=trigger, metrics=metrics)


def detect(
    a: Mapping[str, float],
    b: Mapping[str, float],
    rule: str = "any_band",
    *,
    critical: Sequence[str] = scoring.DEFAULT_CRITICAL_METRICS,
    threshold: float = 0.15,
    weights: Mapping[str, float] = scoring.DEFAULT_PROFILE,
) -> Disagreement:
    """Apply the disagreement rule to two primaries' scores. Symmetric in a and b."""
    differing = band_differences(a, b)
    if rule == "any_band":
        return _band_trigger(rule, differing)
    if rule == "critical_band":
        critical_set = set(critical)
        return _band_trigger(rule, tuple(m for m in differing if m in critical_set))
    if rule == "s_final_delta":
        delta = abs(scoring.s_final(a, weights) - scoring.s_final(b, weights))
        if delta > threshold:
            return Disagreement(disagree=True, trigger="s_final_delta", metrics=differing)
        return AGREE
    raise ValueError(f"unknown disagreement rule {rule!r}; known: {', '.join(RULES)}")


def combine_agree(a: Mapping[str, float], b: Mapping[str, float]) -> dict[str, float]:
    """Agreeing primaries: the final per-metric score is the mean of the two."""
    _check(a, "first")
    _check(b, "second")
    return {m: statistics.fmean((a[m], b[m])) for m in METRICS}


def combine_arbitrated(scores: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Per-metric median of the judges that answered: median of three, mean of two.

    DAFE takes the majority of three binary verdicts; on continuous scores the median is
    the same idea: the value at least two judges are on either side of.
    """
    if not 2 <= len(scores) <= 3:
        raise ValueError(f"arbitration combines 2 or 3 judges' scores, got {len(scores)}")
    for i, s in enumerate(scores):
        _check(s, f"judge #{i}")
    return {m: float(statistics.median(s[m] for s in scores)) for m in METRICS}


def _l1(x: Mapping[str, float], y: Mapping[str, float]) -> float:
    return math.fsum(abs(x[m] - y[m]) for m in METRICS)


def sided_with(
    a: Mapping[str, float], b: Mapping[str, float], arbiter: Mapping[str, float]
) -> Side:
    """Which primary the arbiter agreed with.

    Counted on the metrics where the primaries' bands differ: the primary whose band the
    arbiter shares on more of them wins; a tie is broken by the smaller L1 distance over all
    metrics. ``both``: the primaries' bands do not differ at all (e.g. an s_final_delta
    disagreement), or a split vote at exactly equal distance. ``neither``: on every differing
    metric the arbiter picked a third band.
    """
    _check(arbiter, "arbiter")
    differing = band_differences(a, b)
    if not differing:
        return "both"
    arb_bands = {m: scoring.band(arbiter[m]) for m in differing}
    wins_a = sum(1 for m in differing if arb_bands[m] == scoring.band(a[m]))
    wins_b = sum(1 for m in differing if arb_bands[m] == scoring.band(b[m]))
    if wins_a == 0 and wins_b == 0:
        return "neither"
    if wins_a != wins_b:
        return "primary_a" if wins_a > wins_b else "primary_b"
    dist_a, dist_b = _l1(a, arbiter), _l1(b, arbiter)
    if dist_a == dist_b:
        return "both"
    return "primary_a" if dist_a < dist_b else "primary_b"


@dataclass(frozen=True)
class PanelOutcome:
    """What one panel evaluation did, for counters (no conversation content, no ids)."""

    assistant: str
    status: Literal["ok", "judge_failed"]
    disagreed: bool
    # Metrics whose bands the primaries disagreed on (empty for primary_failed/s_final_delta
    # without band differences).
    disagreement_metrics: tuple[str, ...]
    arbitrated: bool
    trigger: str | None
    # None unless both primaries and the arbiter answered.
    sided_with: Side | None
    cost_by_role: Mapping[str, float] = field(default_factory=dict)


OutcomeObserver = Callable[[PanelOutcome], None]
