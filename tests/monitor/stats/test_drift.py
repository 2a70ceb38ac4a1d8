"""Drift windows and runs: what a turn contributes, and which signals a run flags."""

from __future__ import annotations

import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as hs

from monitor.config.drift import DriftConfig
from monitor.schema.turn import METRICS, TurnSample
from monitor.stats.drift import (
    MISSING,
    WindowSamples,
    analyze,
    signal_names,
)

CFG = DriftConfig(min_turns=10)


def sample(
    *,
    s_final: float = 0.9,
    band: str = "none",
    bad_metric: str | None = None,
    product: str | None = "vpn",
    environment: str | None = "prod",
    labels: dict[str, str | None] | None = None,
    contexts: int = 3,
    retrieval: float | None = 0.8,
    answer_length: int = 200,
    status: str | None = "ok",
) -> TurnSample:
    bands = {m: ("severe" if m == bad_metric else "none") for m in METRICS}
    return TurnSample(
        status=status,
        s_final=s_final if status == "ok" else None,
        turn_band=band if status == "ok" else None,
        metric_bands=bands if status == "ok" else {},
        product=product,
        environment=environment,
        labels=labels or {},
        contexts_count=contexts,
        retrieval_score=retrieval,
        answer_length=answer_length,
    )


def test_signals_without_data_in_a_window_are_insufficient() -> None:
    recent = WindowSamples.of([sample(retrieval=None) for _ in range(40)])
    reference = WindowSamples.of([sample() for _ in range(40)])
    by_signal = {r.signal: r for r in analyze(recent, reference, CFG)}
    assert by_signal["retrieval_score"].status == "insufficient_data"
    assert by_signal["retrieval_score"].recent_n == 0
    assert by_signal["score_final"].status == "ok"


def test_judge_failed_turns_feed_inputs_but_not_outcomes() -> None:
    window = WindowSamples.of(
        [sample(status="judge_failed") for _ in range(4)] + [sample(status="ok")]
    )
    assert (window.turns, window.judged, len(window.s_final)) == (5, 1, 1)
    assert window.categories["input_product"] == Counter({"vpn": 5})
    assert window.metric_n["hallucination"] == 1


def test_missing_categories_are_a_category_of_their_own() -> None:
    window = WindowSamples.of([sample(product=None), sample(product="")], labels=["region"])
    assert window.categories["input_product"] == Counter({MISSING: 2})
    assert window.categories["input_label_region"] == Counter({MISSING: 2})


def test_a_regressed_window_is_detected_and_a_same_distribution_is_not() -> None:
    rng = random.Random(7)

    def window(severe_rate: float, n: int) -> WindowSamples:
        turns = []
        for _ in range(n):
            bad = rng.random() < severe_rate
            turns.append(
                sample(
                    s_final=rng.uniform(0.05, 0.3) if bad else rng.uniform(0.7, 1.0),
                    band="severe" if bad else "none",
                    bad_metric="hallucination" if bad else None,
                    answer_length=rng.randint(150, 250),
                )
            )
        return WindowSamples.of(turns)

    cfg = DriftConfig()
    reference = window(0.05, 2000)
    regressed = analyze(window(0.40, 200), reference, cfg)
    flagged = {r.signal for r in regressed if r.detected}
    assert {"score_final", "band_shares", "metric_hallucination_severe_rate"} <= flagged
    assert "answer_length" not in flagged and "input_product" not in flagged
    healthy = analyze(window(0.05, 200), reference, cfg)
    assert not any(r.detected for r in healthy)
    assert [r.signal for r in healthy] == list(signal_names())


def test_configured_labels_become_bounded_signals() -> None:
    cfg = DriftConfig(min_turns=10, labels=["channel", "Region-Code"])
    names = signal_names(cfg.labels)
    assert "input_label_channel" in names and "input_label_region_code" in names
    assert len(names) == len(set(names)) == 15 + 2
    recent = WindowSamples.of(
        [sample(labels={"channel": "email"}) for _ in range(60)], labels=cfg.labels
    )
    reference = WindowSamples.of(
        [sample(labels={"channel": "chat"}) for _ in range(60)], labels=cfg.labels
    )
    by_signal = {r.signal: r for r in analyze(recent, reference, cfg)}
    assert by_signal["input_label_channel"].detected
    assert by_signal["input_label_region_code"].effect == 0.0  # all missing in both


turn_strategy = hs.builds(
    sample,
    s_final=hs.floats(0, 1),
    band=hs.sampled_from(["severe", "moderate", "minor", "none"]),
    bad_metric=hs.none() | hs.sampled_from(METRICS),
    product=hs.none() | hs.sampled_from(["vpn", "mail", ""]),
    retrieval=hs.none() | hs.floats(0, 1),
    status=hs.sampled_from(["ok", "judge_failed", None]),
)


@settings(max_examples=60, deadline=None)
@given(hs.lists(turn_strategy, max_size=40))
def test_every_turn_is_counted_once_per_signal(turns: list[TurnSample]) -> None:
    w = WindowSamples.of(turns, labels=["channel"])
    judged = sum(t.status == "ok" for t in turns)
    assert (w.turns, w.judged) == (len(turns), judged)
    for counts in w.categories.values():
        assert sum(counts.values()) == len(turns)
    assert sum(w.turn_bands.values()) == len(w.s_final) == judged
    assert all(w.metric_n[m] == judged for m in METRICS)
    assert sum(w.metric_bad.values()) == sum(
        t.status == "ok" and any(b in ("severe", "moderate") for b in t.metric_bands.values())
        for t in turns
    )
    assert len(w.contexts_count) == len(w.answer_length) == len(turns)
    assert len(w.retrieval_score) == sum(t.retrieval_score is not None for t in turns)
