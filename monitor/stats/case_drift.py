"""Case drift: one assistant's recent case verdicts against its reference window's (pure).

The case-level twin of ``monitor.stats.drift``'s outcome signals, over the ok case verdicts
judged in each window (a resumed case judged again counts once per verdict):

===============================  ======  ==================  ===========
signal                           kind    test (scipy)        effect size
===============================  ======  ==================  ===========
case_score                       outcome ks_2samp            KS D
case_band_shares                 outcome chi2_contingency    Cramér's V
case_outcome_shares              outcome chi2_contingency    Cramér's V
case_unresolved_rate             outcome two-proportion z    Cohen's h
case_metric_<m>_severe_rate      outcome two-proportion z    Cohen's h
===============================  ======  ==================  ===========

``case_metric_<m>_severe_rate`` is the share of cases whose band for case metric m is severe or
moderate, as for turns. ``min_turns`` counts cases here. The case signals are a family of their
own for Benjamini-Hochberg (the turn signals' q-values do not change when cases are judged).
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from monitor.config.drift import DriftConfig
from monitor.schema.case import CASE_METRICS, RESOLUTION_OUTCOMES
from monitor.stats.drift import BAD_BANDS, BAND_ORDER
from monitor.stats.drift_stats import (
    SignalResult,
    adjust,
    continuous_test,
    proportion_test,
    shares_test,
)


def case_rate_signal(metric: str) -> str:
    return f"case_metric_{metric}_severe_rate"


CASE_DRIFT_SIGNALS: tuple[str, ...] = (
    "case_score",
    "case_band_shares",
    "case_outcome_shares",
    "case_unresolved_rate",
    *map(case_rate_signal, CASE_METRICS),
)


def _doubles() -> array[float]:
    return array("d")


@dataclass
class CaseWindowSamples:
    """One window's ok case verdicts, accumulated one by one."""

    cases: int = 0
    case_score: array[float] = field(default_factory=_doubles)
    bands: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    metric_bad: Counter[str] = field(default_factory=Counter)
    metric_n: Counter[str] = field(default_factory=Counter)

    def add(
        self,
        case_score: float | None,
        case_band: str | None,
        outcome: str | None,
        metric_bands: Mapping[str, str],
    ) -> None:
        self.cases += 1
        if case_score is not None and math.isfinite(case_score):
            self.case_score.append(case_score)
        if case_band is not None:
            self.bands[case_band] += 1
        if outcome is not None:
            self.outcomes[outcome] += 1
        for metric, band in metric_bands.items():
            if metric in CASE_METRICS:
                self.metric_n[metric] += 1
                self.metric_bad[metric] += band in BAD_BANDS


def analyze_cases(
    recent: CaseWindowSamples, reference: CaseWindowSamples, cfg: DriftConfig
) -> list[SignalResult]:
    """Every signal of ``CASE_DRIFT_SIGNALS``, in that order, BH-adjusted among themselves."""
    results = [
        continuous_test("case_score", "outcome", recent.case_score, reference.case_score, cfg),
        shares_test(
            "case_band_shares",
            "outcome",
            recent.bands,
            reference.bands,
            cfg,
            effect_name="cramers_v",
            order=BAND_ORDER,
        ),
        shares_test(
            "case_outcome_shares",
            "outcome",
            recent.outcomes,
            reference.outcomes,
            cfg,
            effect_name="cramers_v",
            order=RESOLUTION_OUTCOMES,
        ),
        proportion_test(
            "case_unresolved_rate",
            "outcome",
            recent.outcomes["unresolved"],
            sum(recent.outcomes.values()),
            reference.outcomes["unresolved"],
            sum(reference.outcomes.values()),
            cfg,
        ),
    ]
    for metric in CASE_METRICS:
        results.append(
            proportion_test(
                case_rate_signal(metric),
                "outcome",
                recent.metric_bad[metric],
                recent.metric_n[metric],
                reference.metric_bad[metric],
                reference.metric_n[metric],
                cfg,
            )
        )
    return adjust(results, cfg)
