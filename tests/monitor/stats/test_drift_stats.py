"""Drift's two-window tests: hand-computed cases and properties of the statistics."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from monitor.config.drift import DriftConfig
from monitor.stats.drift_stats import (
    OTHER,
    SignalResult,
    adjust,
    benjamini_hochberg,
    cliffs_delta,
    cohens_h,
    continuous_test,
    pooled_columns,
    proportion_test,
    psi,
    rank_test,
    shares_test,
)

CFG = DriftConfig(min_turns=10)


def test_two_proportion_z_test_by_hand() -> None:
    # 30/100 vs 15/100: pooled p = 0.225, se = sqrt(0.225 * 0.775 * (1/100 + 1/100)) = 0.059055,
    # z = 0.15 / 0.059055 = 2.5400, two-sided p = 2 * (1 - Phi(2.54)) = 0.011085.
    # Cohen's h = 2 asin(sqrt 0.30) - 2 asin(sqrt 0.15) = 1.159279 - 0.795399 = 0.363881.
    r = proportion_test("m", "outcome", 30, 100, 15, 100, CFG)
    assert r.test == "two_proportion_z"
    assert r.statistic == pytest.approx(2.5400, abs=1e-4)
    assert r.p_value == pytest.approx(0.011085, abs=1e-6)
    assert r.effect == pytest.approx(0.363881, abs=1e-6)
    assert r.shift == pytest.approx(0.15)
    assert r.details == {"recent_rate": 0.30, "reference_rate": 0.15}


def test_small_expected_counts_use_fishers_exact_test() -> None:
    # 3/20 vs 0/20: pooled 0.075, expected bad count 1.5 < 5 -> Fisher. The one-sided tail
    # of the hypergeometric is C(37,17)/C(40,20) = 0.1053; two-sided doubles it (symmetric).
    r = proportion_test("m", "outcome", 3, 20, 0, 20, CFG)
    assert r.test == "fisher_exact"
    assert r.p_value == pytest.approx(2 * math.comb(37, 17) / math.comb(40, 20), rel=1e-9)
    assert r.effect == pytest.approx(cohens_h(0.15, 0.0))
    # The odds ratio is infinite (no bad turn in the reference): reported as unknown, not inf.
    assert adjust([r], CFG)[0].statistic is None


def test_no_bad_turns_in_either_window_is_no_evidence() -> None:
    r = proportion_test("m", "outcome", 0, 50, 0, 80, CFG)
    assert (r.status, r.p_value, r.effect) == ("ok", 1.0, 0.0)


def test_chi_square_cramers_v_and_psi_by_hand() -> None:
    # [[10, 20], [20, 10]]: chi2 = n (ad - bc)^2 / (r1 r2 c1 c2) = 60 * 300^2 / 30^4 = 6.6667,
    # V = sqrt(6.6667 / 60) = 1/3; p = P(chi2_1 > 6.6667) = 0.009823.
    r = shares_test("s", "input", {"a": 10, "b": 20}, {"a": 20, "b": 10}, CFG, effect_name="psi")
    assert r.statistic == pytest.approx(20 / 3)
    assert r.p_value == pytest.approx(0.009823, abs=1e-6)
    assert r.details["cramers_v"] == pytest.approx(1 / 3)
    # PSI with +0.5 smoothing: shares 10.5/31 and 20.5/31 against 20.5/31 and 10.5/31:
    # 2 * (10/31) * ln(20.5/10.5) = 0.43164.
    assert r.effect == pytest.approx(2 * (10 / 31) * math.log(20.5 / 10.5))
    assert r.effect_name == "psi"


def test_psi_by_hand_on_large_counts() -> None:
    # Shares (0.5, 0.5) vs (0.25, 0.75): 0.25 ln 2 + 0.25 ln 1.5 = 0.27465 (smoothing ~1e-4).
    assert psi([500, 500], [250, 750]) == pytest.approx(
        0.25 * math.log(2) + 0.25 * math.log(1.5), abs=1e-3
    )


def test_ks_and_cliffs_delta_by_hand() -> None:
    recent = [float(x) for x in range(10)]  # 0..9
    reference = [float(x) for x in range(5, 15)]  # 5..14
    r = continuous_test("c", "outcome", recent, reference, CFG)
    assert r.statistic == pytest.approx(0.5)  # the ECDFs differ by 5/10 at x = 4
    assert r.effect == r.statistic
    assert r.shift == pytest.approx(-5.0)
    # Pairs (x, y) with x > y: for x = 6..9, x - 5 of them -> 1+2+3+4 = 10; x == y: 5 pairs;
    # x < y: 100 - 10 - 5 = 85. delta = (10 - 85) / 100 = -0.75.
    assert cliffs_delta(recent, reference) == pytest.approx(-0.75)
    assert r.details["cliffs_delta"] == pytest.approx(-0.75)


def test_benjamini_hochberg_by_hand() -> None:
    # Sorted 0.01, 0.03, 0.04, 0.5 -> p * 4 / rank = 0.04, 0.0667, 0.0533, 0.5; then the
    # running minimum from the top: 0.04, 0.0533, 0.0533, 0.5.
    qs = benjamini_hochberg([0.01, 0.04, 0.03, 0.5])
    assert qs == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.5])


def test_constant_counts_in_both_windows_are_not_drift() -> None:
    r = rank_test("contexts_count", "input", [3.0] * 20, [3.0] * 20, CFG)
    assert (r.p_value, r.effect) == (1.0, 0.0)


def test_too_few_samples_is_insufficient_data_never_no_drift() -> None:
    r = continuous_test("score_final", "outcome", [0.1] * 9, [0.9] * 500, CFG)
    assert r.status == "insufficient_data"
    assert (r.p_value, r.q_value, r.effect, r.detected) == (None, None, None, False)
    assert "recent window has 9 sample(s), fewer than min_turns=10" in r.note
    r = proportion_test("m", "outcome", 5, 50, 0, 3, CFG)
    assert r.status == "insufficient_data" and "reference window has 3" in r.note


def test_rare_categories_are_pooled_so_the_chi_square_stays_valid() -> None:
    recent = {"a": 50, "b": 40, "x1": 1, "x2": 2}
    reference = {"a": 40, "b": 50, "x3": 1}
    names, r, q = pooled_columns(recent, reference, max_categories=20)
    assert names == ["a", "b", OTHER]
    assert (r, q) == ([50, 40, 3], [40, 50, 1])
    names, r, q = pooled_columns({"a": 9, "b": 8, "c": 7}, {"a": 9, "b": 8, "c": 7}, 2)
    assert names == ["a", OTHER] and r == [9, 15]


def test_a_huge_window_does_not_flag_a_trivial_shift() -> None:
    # 50.0 % vs 51.5 % bad on 200k turns each: p ~ 1e-21, but Cohen's h = 0.03 < 0.1.
    r = adjust([proportion_test("m", "outcome", 103_000, 200_000, 100_000, 200_000, CFG)], CFG)[0]
    assert r.q_value is not None and r.q_value < 1e-12
    assert r.effect is not None and abs(r.effect) < 0.1
    assert r.detected is False


def test_detection_needs_the_adjusted_p_value_not_the_raw_one() -> None:
    # Raw p = 0.011 is < alpha 0.02 alone, but 15 signals with p = 0.5 lift its q above it.
    cfg = DriftConfig(min_turns=10, alpha=0.02)
    strong = proportion_test("m", "outcome", 30, 100, 15, 100, cfg)
    nulls = [proportion_test(f"n{i}", "outcome", 50, 100, 50, 100, cfg) for i in range(15)]
    alone = adjust([strong], cfg)[0]
    assert alone.detected
    crowded = adjust([strong, *nulls], cfg)[0]
    assert crowded.q_value == pytest.approx(min(1.0, strong.p_value * 16))  # type: ignore[operator]
    assert not crowded.detected


# ---------------------------------------------------------------- properties

scores = hs.lists(hs.floats(0, 1, allow_nan=False), min_size=10, max_size=60)


@settings(max_examples=60, deadline=None)
@given(scores)
def test_a_window_against_itself_never_drifts(values: list[float]) -> None:
    r = adjust([continuous_test("s", "outcome", values, list(values), CFG)], CFG)[0]
    assert r.effect == 0.0
    assert r.p_value == pytest.approx(1.0)
    assert not r.detected


@settings(max_examples=60, deadline=None)
@given(scores, scores)
def test_swapping_the_windows_keeps_the_evidence_and_flips_the_direction(
    a: list[float], b: list[float]
) -> None:
    ab = continuous_test("s", "outcome", a, b, CFG)
    ba = continuous_test("s", "outcome", b, a, CFG)
    assert ab.statistic == pytest.approx(ba.statistic)
    assert ab.p_value == pytest.approx(ba.p_value)
    assert ab.details["cliffs_delta"] == pytest.approx(-ba.details["cliffs_delta"])
    assert 0.0 <= (ab.effect or 0.0) <= 1.0


counts = hs.tuples(hs.integers(0, 60), hs.integers(10, 60)).filter(lambda t: t[0] <= t[1])


@settings(max_examples=80, deadline=None)
@given(counts, counts)
def test_proportion_test_is_antisymmetric_and_bounded(
    recent: tuple[int, int], reference: tuple[int, int]
) -> None:
    ab = proportion_test("m", "outcome", *recent, *reference, CFG)
    ba = proportion_test("m", "outcome", *reference, *recent, CFG)
    assert ab.effect == pytest.approx(-(ba.effect or 0.0))
    assert ab.p_value == pytest.approx(ba.p_value)
    assert ab.p_value is not None and 0.0 <= ab.p_value <= 1.0
    assert abs(ab.effect or 0.0) <= math.pi


@settings(max_examples=80, deadline=None)
@given(hs.lists(hs.floats(0, 1, allow_nan=False), min_size=1, max_size=30))
def test_bh_q_values_bound_and_keep_the_order_of_p_values(ps: list[float]) -> None:
    qs = benjamini_hochberg(ps)
    assert all(p <= q + 1e-12 and q <= 1.0 for p, q in zip(ps, qs, strict=True))
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    assert all(qs[i] <= qs[j] + 1e-12 for i, j in itertools.pairwise(order))


@settings(max_examples=40, deadline=None)
@given(
    hs.dictionaries(hs.sampled_from("abcdef"), hs.integers(0, 40), min_size=2), hs.integers(2, 50)
)
def test_scaling_every_count_keeps_cramers_v(table: dict[str, int], k: int) -> None:
    # The effect size describes the shift, not the sample size; only the p-value moves.
    reference = {c: 40 - n for c, n in table.items()}
    one = shares_test("s", "input", table, reference, CFG, effect_name="cramers_v")
    many = shares_test(
        "s",
        "input",
        {c: n * k for c, n in table.items()},
        {c: n * k for c, n in reference.items()},
        CFG,
        effect_name="cramers_v",
    )
    if one.status == "ok" and one.note == "" and many.note == "":
        assert many.effect == pytest.approx(one.effect)
        assert (many.p_value or 0.0) <= (one.p_value or 0.0) + 1e-12


@settings(max_examples=40, deadline=None)
@given(hs.integers(0, 9), hs.integers(0, 500))
def test_below_min_turns_nothing_is_tested(n_small: int, n_big: int) -> None:
    results = [
        continuous_test("s", "outcome", [0.5] * n_small, [0.1] * n_big, CFG),
        rank_test("c", "input", [1.0] * n_big, [2.0] * n_small, CFG),
        proportion_test("m", "outcome", n_small, n_small, 0, n_big, CFG),
        shares_test("b", "input", {"a": n_small}, {"b": n_big}, CFG, effect_name="psi"),
    ]
    for r in adjust(results, CFG):
        assert isinstance(r, SignalResult)
        assert r.status == "insufficient_data"
        assert r.detected is False and r.q_value is None


@settings(max_examples=60, deadline=None)
@given(hs.lists(hs.tuples(hs.integers(0, 200), hs.integers(0, 200)), min_size=2, max_size=8))
def test_psi_is_symmetric_non_negative_and_zero_for_equal_shares(
    cells: list[tuple[int, int]],
) -> None:
    a = [x for x, _ in cells]
    b = [y for _, y in cells]
    assert psi(a, b) == pytest.approx(psi(b, a))
    assert psi(a, b) >= -1e-12
    assert psi(a, a) == pytest.approx(0.0, abs=1e-12)
