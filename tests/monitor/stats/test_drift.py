"""Drift windows and runs: what a turn contributes, and which signals a run flags."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest
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


# ---------------------------------------------------------------- under the cascade


def cascade_window(
    rng: random.Random,
    *,
    traffic: int,
    risky_probability: float,
    risky_severe: float,
    other_severe: float,
    other_probability: float = 0.05,
    risky_share: float = 0.1,
) -> tuple[list[TurnSample], list[TurnSample]]:
    """One window of traffic drawn by the cascade: a risky cell (``risky_share`` of the turns,
    severe at ``risky_severe``, drawn at ``risky_probability``) and the rest (severe at
    ``other_severe``, drawn at ``other_probability``). The risky cell's turns differ in their
    inputs too (product, contexts, answers). Returns the drawn turns with their weight 1/π, and
    the same turns without (what the drift job weighed before)."""
    weighted, plain = [], []
    for _ in range(traffic):
        risky = rng.random() < risky_share
        bad = rng.random() < (risky_severe if risky else other_severe)
        probability = risky_probability if risky else other_probability
        if rng.random() >= probability:
            continue  # not drawn: never judged, never stored
        turn = sample(
            s_final=rng.uniform(0.05, 0.3) if bad else rng.uniform(0.7, 1.0),
            band="severe" if bad else "none",
            bad_metric="hallucination" if bad else None,
            product="billing" if risky else "vpn",
            contexts=rng.randint(4, 8) if risky else rng.randint(0, 4),
            retrieval=rng.uniform(0.2, 0.6) if risky else rng.uniform(0.5, 0.9),
            answer_length=rng.randint(400, 600) if risky else rng.randint(150, 300),
        )
        plain.append(turn)
        weighted.append(replace(turn, weight=1.0 / probability))
    return weighted, plain


# The traffic's severe rate 5 %: 10 % of turns in the risky cell at 30 %, the rest at 2.2 %.
BASE = {"risky_severe": 0.3, "other_severe": 0.2 / 9}


def test_a_change_of_cascade_probabilities_alone_is_not_drift_once_weighted() -> None:
    rng = random.Random(11)
    cfg = DriftConfig()
    ref_w, ref = cascade_window(rng, traffic=30_000, risky_probability=0.9, **BASE)
    rec_w, rec = cascade_window(rng, traffic=30_000, risky_probability=0.3, **BASE)

    unweighted = {r.signal: r for r in analyze(WindowSamples.of(rec), WindowSamples.of(ref), cfg)}
    weighted = {r.signal: r for r in analyze(WindowSamples.of(rec_w), WindowSamples.of(ref_w), cfg)}

    # The judged mix moved (the risky cell drawn at 0.3 instead of 0.9): read unweighted, the
    # severe rate, the band shares and every input signal "drift".
    rate = "metric_hallucination_severe_rate"
    moved = {rate, "band_shares", "input_product", "contexts_count",
             "retrieval_score", "answer_length"}  # fmt: skip
    assert moved <= {s for s, r in unweighted.items() if r.detected}
    assert unweighted[rate].test == "two_proportion_z"
    assert (unweighted[rate].q_value or 1.0) < 1e-6
    # Weighted by 1/π the two windows are the same traffic: nothing detected, by a wide margin.
    assert not [s for s, r in weighted.items() if r.detected]
    assert weighted[rate].test == "weighted_two_proportion_z"
    assert min(r.q_value for r in weighted.values() if r.q_value is not None) > 0.05
    assert abs(weighted[rate].effect or 0.0) < 0.05
    assert weighted[rate].details["recent_rate"] == pytest.approx(0.05, abs=0.015)
    # min_turns counts judged turns; the evidence is Kish's n_eff, far below them here.
    assert weighted[rate].recent_n == sum(t.status == "ok" for t in rec_w)
    assert weighted[rate].details["recent_n_eff"] < 0.75 * weighted[rate].recent_n


def test_a_real_change_is_still_detected_under_weights() -> None:
    rng = random.Random(12)
    cfg = DriftConfig()
    ref_w, _ = cascade_window(rng, traffic=30_000, risky_probability=0.9, **BASE)
    # The traffic's severe rate 5 % → 15 % (risky cell 60 %, the rest 10 %), drawn otherwise.
    rec_w, _ = cascade_window(
        rng, traffic=30_000, risky_probability=0.3, risky_severe=0.6, other_severe=0.1
    )
    weighted = {r.signal: r for r in analyze(WindowSamples.of(rec_w), WindowSamples.of(ref_w), cfg)}
    rate = weighted["metric_hallucination_severe_rate"]
    assert rate.detected and (rate.q_value or 1.0) < 1e-6
    assert rate.details["reference_rate"] == pytest.approx(0.05, abs=0.015)
    assert rate.details["recent_rate"] == pytest.approx(0.15, abs=0.03)
    assert {"score_final", "band_shares"} <= {s for s, r in weighted.items() if r.detected}
    assert not weighted["input_product"].detected  # the traffic's inputs did not change


def test_uniform_windows_run_the_unweighted_tests_unchanged() -> None:
    rng = random.Random(13)
    ref_w, ref = cascade_window(rng, traffic=8_000, risky_probability=0.5, other_probability=0.5,
                                **BASE)  # fmt: skip
    rec_w, rec = cascade_window(rng, traffic=8_000, risky_probability=0.5, other_probability=0.5,
                                **BASE)  # fmt: skip
    explicit = [replace(t, weight=1.0) for t in rec]
    cfg = DriftConfig()
    before = analyze(WindowSamples.of(rec), WindowSamples.of(ref), cfg)
    with_ones = analyze(WindowSamples.of(explicit), WindowSamples.of(ref), cfg)
    assert not WindowSamples.of(explicit).weighted
    assert with_ones == before  # every figure identical: the same code path
    assert {r.test for r in before} == {"ks_2samp", "chi2_contingency", "two_proportion_z",
                                        "mannwhitneyu"}  # fmt: skip
    assert not any("recent_n_eff" in r.details for r in before)
    # One window of equal weights ≠ 1 (every turn drawn at 0.5) takes the weighted tests, whose
    # figures are then those of the unweighted tests (the KS p-value ks_2samp's asymptotic one).
    equal = {r.signal: r for r in analyze(WindowSamples.of(rec_w), WindowSamples.of(ref_w), cfg)}
    for r in before:
        w = equal[r.signal]
        assert w.test.startswith("weighted_")
        assert w.effect == pytest.approx(r.effect, abs=1e-9)
        if r.test != "ks_2samp":
            assert w.p_value == pytest.approx(r.p_value, rel=1e-6, abs=1e-300)


@settings(max_examples=60, deadline=None)
@given(hs.lists(hs.tuples(turn_strategy, hs.sampled_from([1.0, 1.0, 2.0, 20.0, 100.0]))))
def test_every_turn_adds_its_weight_once_per_signal(pairs: list[tuple[TurnSample, float]]) -> None:
    turns = [replace(t, weight=w) for t, w in pairs]
    window = WindowSamples.of(turns, labels=["channel"])
    total = sum(t.weight for t in turns)
    judged = [t.weight for t in turns if t.status == "ok"]
    assert window.weighted == any(t.weight != 1.0 for t in turns)
    assert sum(window.turn_w) == pytest.approx(total)
    for counts in window.categories_w.values():
        assert sum(counts.values()) == pytest.approx(total)
    assert sum(window.turn_bands_w.values()) == pytest.approx(sum(judged))
    assert window.turn_bands_w2 == pytest.approx(sum(w * w for w in judged))
    assert list(window.s_final_w) == judged
    for m in METRICS:
        assert window.metric_n_w.get(m, 0.0) == pytest.approx(sum(judged))
        assert window.metric_bad_w.get(m, 0.0) == pytest.approx(
            sum(t.weight for t in turns if t.status == "ok" and t.metric_bands[m] == "severe")
        )
