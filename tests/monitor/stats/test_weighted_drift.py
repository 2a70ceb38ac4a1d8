"""The drift tests weighted by 1/π: equal weights give the unweighted figures, and small
weighted cases agree with the same figures computed here by hand."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from monitor.config.drift import DriftConfig
from monitor.stats.drift_stats import (
    cliffs_delta,
    proportion_test,
    rank_test,
    shares_test,
)
from monitor.stats.weighted_drift import (
    kish_n_eff,
    weighted_continuous_test,
    weighted_ks_d,
    weighted_proportion_test,
    weighted_rank_test,
    weighted_shares_test,
    weighted_superiority,
)

CFG = DriftConfig(min_turns=2)


def _rate_window(bad: int, n: int, w: float) -> tuple[int, float, float, float]:
    return n, bad * w, n * w, n * w * w


# ---------------------------------------------------------------- equal weights


@pytest.mark.parametrize(("x1", "n1", "x0", "n0"), [(30, 300, 60, 400), (1, 300, 6, 400)])
def test_equal_weights_give_the_proportion_tests_figures(
    x1: int, n1: int, x0: int, n0: int
) -> None:
    plain = proportion_test("r", "outcome", x1, n1, x0, n0, CFG)
    weighted = weighted_proportion_test(
        "r", "outcome", _rate_window(x1, n1, 2.5), _rate_window(x0, n0, 7.0), CFG
    )
    assert weighted.test == f"weighted_{plain.test}"
    assert weighted.p_value == pytest.approx(plain.p_value, rel=1e-9)
    assert weighted.effect == pytest.approx(plain.effect, rel=1e-12)
    assert weighted.details["recent_n_eff"] == pytest.approx(n1)
    assert (weighted.recent_n, weighted.reference_n) == (n1, n0)


def test_equal_weights_give_the_shares_tests_figures() -> None:
    recent = Counter({"a": 100, "b": 150, "c": 50, "d": 2})
    reference = Counter({"a": 150, "b": 150, "c": 90, "e": 3})
    n1, n0 = sum(recent.values()), sum(reference.values())
    for effect in ("psi", "cramers_v"):
        plain = shares_test("s", "input", recent, reference, CFG, effect_name=effect)
        weighted = weighted_shares_test(
            "s",
            "input",
            (n1, {k: 3.0 * v for k, v in recent.items()}, 9.0 * n1),
            (n0, {k: 1.5 * v for k, v in reference.items()}, 2.25 * n0),
            CFG,
            effect_name=effect,
        )
        assert weighted.p_value == pytest.approx(plain.p_value, rel=1e-9)
        assert weighted.effect == pytest.approx(plain.effect, rel=1e-9)
        assert weighted.details["categories"] == plain.details["categories"]


def test_equal_weights_give_the_ks_tests_figures() -> None:
    rng = np.random.default_rng(1)
    x, y = list(rng.normal(0, 1, 300)), list(rng.normal(0.2, 1, 400))
    weighted = weighted_continuous_test("k", "outcome", (x, [4.0] * 300), (y, [1.2] * 400), CFG)
    # ks_2samp's own large-sample p-value: kstwo at round(n1·n0/(n1+n0)).
    asymp = stats.ks_2samp(x, y, method="asymp")
    assert weighted.statistic == pytest.approx(float(asymp.statistic), abs=1e-12)
    assert weighted.p_value == pytest.approx(float(asymp.pvalue), rel=1e-9)
    assert weighted.details["cliffs_delta"] == pytest.approx(cliffs_delta(x, y), abs=1e-12)
    assert weighted.details["recent_mean"] == pytest.approx(float(np.mean(x)))


def test_equal_weights_give_the_mann_whitney_tests_figures() -> None:
    rng = np.random.default_rng(2)
    x = [float(v) for v in rng.integers(0, 5, 300)]
    y = [float(v) for v in rng.integers(0, 6, 400)]
    plain = rank_test("c", "input", x, y, CFG)
    weighted = weighted_rank_test("c", "input", (x, [0.5] * 300), (y, [20.0] * 400), CFG)
    assert weighted.p_value == pytest.approx(plain.p_value, rel=1e-9)
    assert weighted.effect == pytest.approx(plain.effect, abs=1e-12)
    assert weighted.statistic == pytest.approx(plain.statistic, rel=1e-12)


# ---------------------------------------------------------------- known weighted cases


def test_kish_effective_size() -> None:
    assert kish_n_eff(4.0, 4.0) == 4.0  # four weights of 1
    assert kish_n_eff(1.0 + 9.0, 1.0 + 81.0) == pytest.approx(100 / 82)
    assert kish_n_eff(0.0, 0.0) == 0.0


def test_a_weighted_proportion_is_the_hajek_share_tested_at_the_effective_sizes() -> None:
    # recent: 40 turns, 10 bad at weight 1 and 30 good at weight 10; reference: 50 turns at 2.
    recent = (40, 10 * 1.0, 10 * 1.0 + 30 * 10.0, 10 * 1.0 + 30 * 100.0)
    reference = (50, 20 * 2.0, 50 * 2.0, 50 * 4.0)
    result = weighted_proportion_test("r", "outcome", recent, reference, CFG)
    p1, p0 = 10 / 310, 20 / 50
    n1e, n0e = 310**2 / 3010, 50.0
    pooled = (p1 * n1e + p0 * n0e) / (n1e + n0e)
    z = (p1 - p0) / math.sqrt(pooled * (1 - pooled) * (1 / n1e + 1 / n0e))
    assert result.test == "weighted_two_proportion_z"
    assert result.details["recent_rate"] == pytest.approx(p1)
    assert result.statistic == pytest.approx(z)
    assert result.p_value == pytest.approx(math.erfc(abs(z) / math.sqrt(2)))
    assert result.effect == pytest.approx(2 * math.asin(p1**0.5) - 2 * math.asin(p0**0.5))
    assert result.details["recent_n_eff"] == pytest.approx(n1e)
    assert (result.recent_n, result.reference_n) == (40, 50)  # min_turns counts turns


def test_a_small_weighted_proportion_goes_to_fisher_on_rounded_counts() -> None:
    # recent: 2 bad of 30 at weight 3 (n_eff 30, share 1/15); reference: 0 bad of 40 at weight 1.
    result = weighted_proportion_test(
        "r", "outcome", (30, 6.0, 90.0, 270.0), (40, 0.0, 40.0, 40.0), CFG
    )
    assert result.test == "weighted_fisher_exact"
    expected = stats.fisher_exact([[2, 28], [0, 40]]).pvalue
    assert result.p_value == pytest.approx(float(expected))


def test_weighted_shares_are_tested_scaled_to_the_effective_sizes() -> None:
    # recent: categories a, b with weighted totals 30 and 10 over weights whose Σw² is 100
    # (n_eff 16); reference: a, b at 20 and 20 with Σw² 40 (n_eff 40).
    result = weighted_shares_test(
        "s", "input", (12, {"a": 30.0, "b": 10.0}, 100.0), (40, {"a": 20.0, "b": 20.0}, 40.0), CFG,
        effect_name="cramers_v", order=["a", "b"],
    )  # fmt: skip
    table = [[0.75 * 16, 0.25 * 16], [0.5 * 40, 0.5 * 40]]
    rows, cols, total = [sum(r) for r in table], [sum(c) for c in zip(*table, strict=True)], 56.0
    chi2 = sum(
        (table[i][j] - rows[i] * cols[j] / total) ** 2 / (rows[i] * cols[j] / total)
        for i in range(2)
        for j in range(2)
    )
    assert result.statistic == pytest.approx(chi2)
    assert result.p_value == pytest.approx(math.erfc(math.sqrt(chi2 / 2)))  # chi2, 1 dof
    assert result.effect == pytest.approx(math.sqrt(chi2 / total))
    assert result.details["recent_n_eff"] == pytest.approx(16.0)


def test_weighted_ecdfs_and_their_ks_distance() -> None:
    # F_x: 1 → 1/4, 2 → 1/2, 3 → 1; F_y: 2 → 1/4, 4 → 1: the largest gap is at 3.
    x, a, y, b = [1.0, 2.0, 3.0], [1.0, 1.0, 2.0], [2.0, 4.0], [1.0, 3.0]
    assert weighted_ks_d(x, a, y, b) == pytest.approx(0.75)
    result = weighted_continuous_test("k", "input", (x, a), (y, b), CFG)
    # n_eff 16/6 and 16/10: n1e·n0e/(n1e+n0e) rounds to 1, where D is uniform on [1/2, 1].
    assert result.p_value == pytest.approx(0.5)
    assert result.details["recent_mean"] == pytest.approx((1 + 2 + 6) / 4)
    assert result.details["reference_median"] == 4.0


def test_weighted_superiority_counts_each_pair_by_its_weights() -> None:
    # Pairs (x, y) with weight a·b: (1,2) less 1, (1,3) less 1, (3,2) greater 3, (3,3) tie 3.
    x, a, y, b = [1.0, 3.0], [1.0, 3.0], [2.0, 3.0], [1.0, 1.0]
    assert weighted_superiority(x, a, y, b) == pytest.approx((3 / 8, 2 / 8))
    result = weighted_rank_test("c", "input", (x, a), (y, b), CFG)
    assert result.effect == pytest.approx(1 / 8)
    n1e, n0e = 16 / 10, 2.0
    u = (3 / 8 + 0.5 * 3 / 8) * n1e * n0e
    # ties on the n_eff scale: 1 → 1/4·n1e; 2 → 1/2·n0e; 3 → 3/4·n1e + 1/2·n0e
    t = [0.25 * n1e, 0.5 * n0e, 0.75 * n1e + 0.5 * n0e]
    n = n1e + n0e
    s = math.sqrt(n1e * n0e / 12 * ((n + 1) - sum(v**3 - v for v in t) / (n * (n - 1))))
    z = (max(u, n1e * n0e - u) - n1e * n0e / 2 - 0.5) / s
    assert result.statistic == pytest.approx(u)
    assert result.p_value == pytest.approx(min(1.0, math.erfc(z / math.sqrt(2))))


def test_scaling_one_windows_weights_changes_nothing() -> None:
    rng = np.random.default_rng(3)
    x, y = list(rng.normal(0, 1, 80)), list(rng.normal(0.5, 1, 90))
    a, b = list(rng.uniform(1, 20, 80)), list(rng.uniform(1, 3, 90))
    one = weighted_continuous_test("k", "input", (x, a), (y, b), CFG)
    other = weighted_continuous_test("k", "input", (x, [7 * w for w in a]), (y, b), CFG)
    assert other.p_value == pytest.approx(one.p_value)
    assert other.details["cliffs_delta"] == pytest.approx(one.details["cliffs_delta"])
    ranks = weighted_rank_test("c", "input", (x, a), (y, b), CFG)
    scaled = weighted_rank_test("c", "input", (x, a), (y, [0.1 * w for w in b]), CFG)
    assert scaled.p_value == pytest.approx(ranks.p_value)


def test_below_min_turns_weighted_tests_are_insufficient_whatever_the_weights() -> None:
    cfg = DriftConfig(min_turns=30)
    result = weighted_proportion_test(
        "r", "outcome", (20, 100.0, 1000.0, 50000.0), (40, 4.0, 40.0, 40.0), cfg
    )
    assert result.status == "insufficient_data" and result.p_value is None
    assert "recent window has 20" in result.note
