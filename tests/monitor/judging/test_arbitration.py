"""DAFE disagreement rules and score combination (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.judging import arbitration
from monitor.schema.turn import METRICS
from monitor.scoring import turn as scoring

score = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
score_map = st.fixed_dictionaries({m: score for m in METRICS})


def uniform(value: float, **overrides: float) -> dict[str, float]:
    return {**{m: value for m in METRICS}, **overrides}


# ------------------------------------------------------------------ detect


def test_identical_scores_agree_under_every_rule() -> None:
    s = uniform(0.9)
    for rule in arbitration.RULES:
        assert arbitration.detect(s, s, rule) == arbitration.AGREE


def test_any_band_names_the_single_metric_that_differs() -> None:
    d = arbitration.detect(uniform(0.9), uniform(0.9, answer_type_fit=0.5), "any_band")
    assert d == arbitration.Disagreement(True, "band:answer_type_fit", ("answer_type_fit",))


def test_any_band_with_several_metrics_uses_the_rule_as_trigger() -> None:
    b = uniform(0.9, hallucination=0.2, answer_type_fit=0.5)
    d = arbitration.detect(uniform(0.9), b, "any_band")
    assert d.disagree and d.trigger == "any_band"
    assert d.metrics == ("hallucination", "answer_type_fit")


def test_same_band_small_difference_is_agreement() -> None:
    # 0.87 and 0.99 are both band "none": a score gap inside one band is not a disagreement.
    assert not arbitration.detect(uniform(0.87), uniform(0.99)).disagree


def test_critical_band_ignores_non_critical_metrics() -> None:
    a = uniform(0.9)
    non_critical = uniform(0.9, answer_type_fit=0.1, context_sufficiency=0.1)
    assert not arbitration.detect(a, non_critical, "critical_band").disagree
    critical = uniform(0.9, identifier_integrity=0.1, answer_type_fit=0.1)
    d = arbitration.detect(a, critical, "critical_band")
    assert d == arbitration.Disagreement(
        True, "band:identifier_integrity", ("identifier_integrity",)
    )


def test_critical_band_honours_a_custom_critical_set() -> None:
    b = uniform(0.9, answer_type_fit=0.1)
    d = arbitration.detect(uniform(0.9), b, "critical_band", critical=["answer_type_fit"])
    assert d.trigger == "band:answer_type_fit"


def test_s_final_delta_uses_the_weighted_score_and_the_threshold() -> None:
    a, b = uniform(0.9), uniform(0.9, hallucination=0.1)  # ΔS_final = 0.2 · 0.8 = 0.16
    weights = scoring.DEFAULT_PROFILE
    d = arbitration.detect(a, b, "s_final_delta", threshold=0.15, weights=weights)
    assert d == arbitration.Disagreement(True, "s_final_delta", ("hallucination",))
    assert not arbitration.detect(a, b, "s_final_delta", threshold=0.17, weights=weights).disagree
    uniform_w = scoring.UNIFORM_PROFILE  # ΔS_final = 0.8 / 8 = 0.1
    assert not arbitration.detect(a, b, "s_final_delta", threshold=0.15, weights=uniform_w).disagree


def test_unknown_rule_and_missing_metrics_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown disagreement rule"):
        arbitration.detect(uniform(0.5), uniform(0.5), "majority")
    incomplete = {m: 0.5 for m in METRICS[:-1]}
    with pytest.raises(ValueError, match="resolution_alignment"):
        arbitration.detect(uniform(0.5), incomplete)


@given(score_map, score_map, st.sampled_from(arbitration.RULES))
def test_detect_is_symmetric(a: dict[str, float], b: dict[str, float], rule: str) -> None:
    assert arbitration.detect(a, b, rule) == arbitration.detect(b, a, rule)


@given(score_map, score_map)
def test_band_rules_nest(a: dict[str, float], b: dict[str, float]) -> None:
    # A critical-band disagreement is always also an any-band disagreement.
    critical = arbitration.detect(a, b, "critical_band")
    any_band = arbitration.detect(a, b, "any_band")
    assert set(critical.metrics) <= set(any_band.metrics)
    assert any_band.disagree == bool(any_band.metrics)


# ------------------------------------------------------------------ combination


@given(score_map, score_map)
def test_agreement_is_the_mean_and_symmetric(a: dict[str, float], b: dict[str, float]) -> None:
    combined = arbitration.combine_agree(a, b)
    assert combined == arbitration.combine_agree(b, a)
    for m in METRICS:
        assert combined[m] == pytest.approx((a[m] + b[m]) / 2)
        assert min(a[m], b[m]) <= combined[m] <= max(a[m], b[m])


@given(score_map, score_map, score_map)
def test_median_of_three_lies_between_min_and_max(
    a: dict[str, float], b: dict[str, float], c: dict[str, float]
) -> None:
    combined = arbitration.combine_arbitrated([a, b, c])
    assert combined == arbitration.combine_arbitrated([c, b, a])
    for m in METRICS:
        values = sorted((a[m], b[m], c[m]))
        assert combined[m] == values[1]
        assert values[0] <= combined[m] <= values[2]


@given(score_map, score_map)
def test_two_answering_judges_combine_to_their_mean(
    a: dict[str, float], b: dict[str, float]
) -> None:
    assert arbitration.combine_arbitrated([a, b]) == arbitration.combine_agree(a, b)


def test_median_takes_the_arbiters_side_of_a_split() -> None:
    a, b, arb = uniform(0.9), uniform(0.9, hallucination=0.1), uniform(0.9, hallucination=0.2)
    assert arbitration.combine_arbitrated([a, b, arb])["hallucination"] == 0.2


def test_combine_arbitrated_needs_two_or_three() -> None:
    with pytest.raises(ValueError, match="2 or 3"):
        arbitration.combine_arbitrated([uniform(0.5)])
    with pytest.raises(ValueError, match="2 or 3"):
        arbitration.combine_arbitrated([uniform(0.5)] * 4)


# ------------------------------------------------------------------ sided_with


def test_sided_with_counts_band_agreement_on_the_disputed_metrics() -> None:
    a = uniform(0.9)
    b = uniform(0.9, hallucination=0.1, answer_type_fit=0.1)
    assert arbitration.sided_with(a, b, uniform(0.95)) == "primary_a"
    assert arbitration.sided_with(a, b, uniform(0.9, hallucination=0.2, answer_type_fit=0.2)) == (
        "primary_b"
    )
    # A third band on every disputed metric.
    assert arbitration.sided_with(a, b, uniform(0.9, hallucination=0.5, answer_type_fit=0.5)) == (
        "neither"
    )


def test_sided_with_breaks_a_split_vote_by_l1_distance() -> None:
    a = uniform(0.9)
    b = uniform(0.9, hallucination=0.1, answer_type_fit=0.1)
    # Sides with a on hallucination and with b on answer_type_fit; nearer to b overall.
    arb = uniform(0.9, hallucination=0.87, answer_type_fit=0.1)
    assert arbitration.sided_with(a, b, arb) == "primary_b"
    # One metric each and exactly equal distances (0.8 each): a split vote.
    exact_split = uniform(0.9, hallucination=0.9, answer_type_fit=0.1)
    assert arbitration.sided_with(a, b, exact_split) == "both"


def test_sided_with_both_when_the_primaries_share_every_band() -> None:
    assert arbitration.sided_with(uniform(0.9), uniform(0.95), uniform(0.1)) == "both"


@given(score_map, score_map, score_map)
def test_sided_with_is_symmetric(
    a: dict[str, float], b: dict[str, float], arb: dict[str, float]
) -> None:
    swap = {
        "primary_a": "primary_b",
        "primary_b": "primary_a",
        "both": "both",
        "neither": "neither",
    }
    assert arbitration.sided_with(b, a, arb) == swap[arbitration.sided_with(a, b, arb)]


@given(score_map, score_map)
def test_an_arbiter_equal_to_a_primary_sides_with_it(
    a: dict[str, float], b: dict[str, float]
) -> None:
    side = arbitration.sided_with(a, b, a)
    assert side == ("both" if not arbitration.band_differences(a, b) else "primary_a")
