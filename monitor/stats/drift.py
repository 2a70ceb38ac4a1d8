"""Drift statistics: one assistant's recent window of turns against a reference window.

Pure: samples in, one ``SignalResult`` per signal out; ``monitor/jobs/drift.py`` reads the
windows from the store and exports the results. The signals are a fixed, bounded set:

================================  ======  ==================  ===================
signal                            kind    test (scipy)        effect size
================================  ======  ==================  ===================
score_final                       outcome ks_2samp            KS D
band_shares                       outcome chi2_contingency    Cramér's V
metric_<m>_severe_rate            outcome two-proportion z    Cohen's h
                                          (Fisher's exact
                                          when counts are
                                          small)
input_product, input_environment, input  chi2_contingency    PSI
input_label_<configured key>
contexts_count                    input   mannwhitneyu        Cliff's delta
retrieval_score (top context)     input   ks_2samp            KS D
answer_length (characters)        input   ks_2samp            KS D
================================  ======  ==================  ===================

``metric_<m>_severe_rate`` is the share of judged turns whose band for metric m is severe or
moderate (the bands an operator acts on). A signal runs only when both windows hold at least
``min_turns`` samples for it; otherwise it is ``insufficient_data`` (never "no drift"). The
p-values of one run are adjusted with Benjamini-Hochberg (``q_value``), and a signal is
``detected`` only when ``q < alpha`` AND its effect size reaches the configured minimum, so a
huge window does not flag a trivial shift.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from monitor.config.drift import DriftConfig, drift_label_signal
from monitor.schema.turn import METRICS, Band, TurnSample
from monitor.stats.drift_stats import (
    SignalResult,
    adjust,
    continuous_test,
    proportion_test,
    rank_test,
    shares_test,
)
from monitor.stats.weighted_drift import (
    weighted_continuous_test,
    weighted_proportion_test,
    weighted_rank_test,
    weighted_shares_test,
)

__all__ = [
    "BAND_ORDER",
    "MISSING",
    "SignalResult",
    "WindowSamples",
    "analyze",
    "signal_names",
]


MISSING = "__missing__"
BAD_BANDS = frozenset({Band.SEVERE.value, Band.MODERATE.value})
BAND_ORDER = tuple(b.value for b in Band)


def rate_signal(metric: str) -> str:
    """The signal of ``metric``'s severe+moderate rate."""
    return f"metric_{metric}_severe_rate"


OUTCOME_SIGNALS: tuple[str, ...] = ("score_final", "band_shares", *map(rate_signal, METRICS))
BASE_INPUT_SIGNALS: tuple[str, ...] = ("input_product", "input_environment")
NUMERIC_INPUT_SIGNALS: tuple[str, ...] = ("contexts_count", "retrieval_score", "answer_length")


def signal_names(labels: Sequence[str] = ()) -> tuple[str, ...]:
    """Every signal of a run, in report order (bounded: 15 + one per configured label)."""
    return (
        *OUTCOME_SIGNALS,
        *BASE_INPUT_SIGNALS,
        *(drift_label_signal(k) for k in labels),
        *NUMERIC_INPUT_SIGNALS,
    )


# ---------------------------------------------------------------- samples


def _doubles() -> array[float]:
    # 8 bytes a value instead of a list's 32: a week of turns is several hundred thousand.
    return array("d")


@dataclass
class WindowSamples:
    """One window, accumulated turn by turn: counts for shares, raw values for distributions."""

    labels: tuple[str, ...] = ()
    turns: int = 0
    judged: int = 0
    s_final: array[float] = field(default_factory=_doubles)
    turn_bands: Counter[str] = field(default_factory=Counter)
    metric_bad: Counter[str] = field(default_factory=Counter)
    metric_n: Counter[str] = field(default_factory=Counter)
    categories: dict[str, Counter[str]] = field(default_factory=dict)
    contexts_count: array[float] = field(default_factory=_doubles)
    retrieval_score: array[float] = field(default_factory=_doubles)
    answer_length: array[float] = field(default_factory=_doubles)
    # Each sample's weight 1/π beside it (the cascade's draws; 1 otherwise), and the weighted
    # totals of the counters above; ``weighted`` once any weight differs from 1.
    weighted: bool = False
    turn_w: array[float] = field(default_factory=_doubles)  # every turn: inputs
    s_final_w: array[float] = field(default_factory=_doubles)
    retrieval_w: array[float] = field(default_factory=_doubles)
    turn_bands_w: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    turn_bands_w2: float = 0.0
    metric_bad_w: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    metric_n_w: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    metric_n_w2: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    categories_w: dict[str, dict[str, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._label_signals = [(k, drift_label_signal(k)) for k in self.labels]
        for signal in (*BASE_INPUT_SIGNALS, *(sig for _, sig in self._label_signals)):
            self.categories.setdefault(signal, Counter())
            self.categories_w.setdefault(signal, defaultdict(float))
        self._product = self.categories["input_product"]
        self._environment = self.categories["input_environment"]

    def add(self, turn: TurnSample) -> None:
        w = turn.weight
        self.weighted = self.weighted or w != 1.0
        self.turns += 1
        product, environment = turn.product or MISSING, turn.environment or MISSING
        self._product[product] += 1
        self._environment[environment] += 1
        self.categories_w["input_product"][product] += w
        self.categories_w["input_environment"][environment] += w
        for key, signal in self._label_signals:
            value = turn.labels.get(key) or MISSING
            self.categories[signal][value] += 1
            self.categories_w[signal][value] += w
        self.contexts_count.append(float(turn.contexts_count))
        self.answer_length.append(float(turn.answer_length))
        self.turn_w.append(w)
        if turn.retrieval_score is not None and math.isfinite(turn.retrieval_score):
            self.retrieval_score.append(turn.retrieval_score)
            self.retrieval_w.append(w)
        if turn.status != "ok":
            return  # judge_failed (or no verdict): inputs only, never scored
        self.judged += 1
        if turn.s_final is not None and math.isfinite(turn.s_final):
            self.s_final.append(turn.s_final)
            self.s_final_w.append(w)
        if turn.turn_band is not None:
            self.turn_bands[turn.turn_band] += 1
            self.turn_bands_w[turn.turn_band] += w
            self.turn_bands_w2 += w * w
        for metric, band in turn.metric_bands.items():
            if metric in METRICS:
                bad = band in BAD_BANDS
                self.metric_n[metric] += 1
                self.metric_bad[metric] += bad
                self.metric_n_w[metric] += w
                self.metric_n_w2[metric] += w * w
                self.metric_bad_w[metric] += w * bad

    @classmethod
    def of(cls, turns: Iterable[TurnSample], labels: Sequence[str] = ()) -> WindowSamples:
        window = cls(labels=tuple(labels))
        for turn in turns:
            window.add(turn)
        return window


def analyze(
    recent: WindowSamples, reference: WindowSamples, cfg: DriftConfig
) -> list[SignalResult]:
    """Every signal of ``signal_names(cfg.labels)``, in that order, BH-adjusted. When a turn of
    either window weighs other than 1 (a cascade draw), the weighted tests run instead:
    ``monitor.stats.weighted_drift``; otherwise the tests below, unchanged."""
    if recent.weighted or reference.weighted:
        return adjust(_weighted_results(recent, reference, cfg), cfg)
    results: list[SignalResult] = [
        continuous_test("score_final", "outcome", recent.s_final, reference.s_final, cfg),
        shares_test(
            "band_shares",
            "outcome",
            recent.turn_bands,
            reference.turn_bands,
            cfg,
            effect_name="cramers_v",
            order=BAND_ORDER,
        ),
    ]
    for metric in METRICS:
        results.append(
            proportion_test(
                rate_signal(metric),
                "outcome",
                recent.metric_bad[metric],
                recent.metric_n[metric],
                reference.metric_bad[metric],
                reference.metric_n[metric],
                cfg,
            )
        )
    for signal in (*BASE_INPUT_SIGNALS, *(drift_label_signal(k) for k in cfg.labels)):
        results.append(
            shares_test(
                signal,
                "input",
                recent.categories.get(signal, Counter()),
                reference.categories.get(signal, Counter()),
                cfg,
                effect_name="psi",
            )
        )
    results.append(
        rank_test("contexts_count", "input", recent.contexts_count, reference.contexts_count, cfg)
    )
    results.append(
        continuous_test(
            "retrieval_score", "input", recent.retrieval_score, reference.retrieval_score, cfg
        )
    )
    results.append(
        continuous_test(
            "answer_length", "input", recent.answer_length, reference.answer_length, cfg
        )
    )
    return adjust(results, cfg)


def _weighted_results(
    recent: WindowSamples, reference: WindowSamples, cfg: DriftConfig
) -> list[SignalResult]:
    """The signals of ``analyze`` with each turn weighted by 1/π (same order, not adjusted)."""

    def bands(w: WindowSamples) -> tuple[int, Mapping[str, float], float]:
        return sum(w.turn_bands.values()), w.turn_bands_w, w.turn_bands_w2

    def rate(w: WindowSamples, metric: str) -> tuple[int, float, float, float]:
        return (
            w.metric_n[metric],
            w.metric_bad_w.get(metric, 0.0),
            w.metric_n_w.get(metric, 0.0),
            w.metric_n_w2.get(metric, 0.0),
        )

    turn_w2 = {id(w): _square_sum(w.turn_w) for w in (recent, reference)}

    def shares(w: WindowSamples, signal: str) -> tuple[int, Mapping[str, float], float]:
        return w.turns, w.categories_w.get(signal, {}), turn_w2[id(w)]

    results: list[SignalResult] = [
        weighted_continuous_test(
            "score_final",
            "outcome",
            (recent.s_final, recent.s_final_w),
            (reference.s_final, reference.s_final_w),
            cfg,
        ),
        weighted_shares_test(
            "band_shares",
            "outcome",
            bands(recent),
            bands(reference),
            cfg,
            effect_name="cramers_v",
            order=BAND_ORDER,
        ),
    ]
    for metric in METRICS:
        results.append(
            weighted_proportion_test(
                rate_signal(metric), "outcome", rate(recent, metric), rate(reference, metric), cfg
            )
        )
    for signal in (*BASE_INPUT_SIGNALS, *(drift_label_signal(k) for k in cfg.labels)):
        results.append(
            weighted_shares_test(
                signal,
                "input",
                shares(recent, signal),
                shares(reference, signal),
                cfg,
                effect_name="psi",
            )
        )
    results.append(
        weighted_rank_test(
            "contexts_count",
            "input",
            (recent.contexts_count, recent.turn_w),
            (reference.contexts_count, reference.turn_w),
            cfg,
        )
    )
    results.append(
        weighted_continuous_test(
            "retrieval_score",
            "input",
            (recent.retrieval_score, recent.retrieval_w),
            (reference.retrieval_score, reference.retrieval_w),
            cfg,
        )
    )
    results.append(
        weighted_continuous_test(
            "answer_length",
            "input",
            (recent.answer_length, recent.turn_w),
            (reference.answer_length, reference.turn_w),
            cfg,
        )
    )
    return results


def _square_sum(weights: Sequence[float]) -> float:
    w = np.asarray(weights, dtype=float)
    return float(np.dot(w, w))
