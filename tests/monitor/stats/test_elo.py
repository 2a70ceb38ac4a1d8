"""DICE eqs. 5-6: per-match normalised Elo update with upset-amplified K."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.stats.elo import EloConfig, MatchResult, apply, expected, replay, update


def test_expected_score() -> None:
    assert expected(1500, 1500) == 0.5
    assert expected(1900, 1500) == pytest.approx(10 / 11)  # 400 points: 10:1 odds
    assert expected(1500, 1900) == pytest.approx(1 / 11)


def test_update_uses_the_mean_score_over_the_questions() -> None:
    # Equal ratings, A scores 3 of 4 questions: R' = 1500 + 32 * (0.75 - 0.5) = 1508.
    match = MatchResult("a", "b", {"q1": 1.0, "q2": 1.0, "q3": 0.5, "q4": 0.5})
    assert match.mean_a == 0.75
    ratings = replay(["a", "b"], [match])
    assert ratings == {"a": 1508.0, "b": 1492.0}


def test_upset_amplifies_k_for_both_sides() -> None:
    # A (1400) beats B (1600): ΔR = 200, E_A = 1/(1+10^0.5) = 0.2402.
    e_a = 1 / (1 + 10**0.5)
    new_a, new_b = update(1400, 1600, 1.0)
    assert new_a == pytest.approx(1400 + 32 * 1.5 * (1.0 - e_a))  # K × (1 + 200/400)
    assert new_b == pytest.approx(1600 - 32 * (1 + 200 / 600) * (1.0 - e_a))
    # The favourite winning is no upset: plain K.
    fav_b, fav_a = update(1600, 1400, 1.0)
    assert fav_b == pytest.approx(1600 + 32 * e_a)
    assert fav_a == pytest.approx(1400 - 32 * e_a)


def test_match_without_judged_questions_changes_nothing() -> None:
    ratings = {"a": 1500.0, "b": 1510.0}
    apply(ratings, MatchResult("a", "b", {}))
    assert ratings == {"a": 1500.0, "b": 1510.0}


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="itself"):
        MatchResult("a", "a", {})
    with pytest.raises(ValueError, match="not in"):
        MatchResult("a", "b", {"q": 1.5})
    with pytest.raises(ValueError, match="K"):
        EloConfig(k=0)
    with pytest.raises(ValueError, match="mean score"):
        update(1500, 1500, -0.1)


@given(
    st.floats(1000, 2000),
    st.floats(1000, 2000),
    st.floats(0, 1),
)
def test_the_better_performer_never_loses_rating(ra: float, rb: float, mean_a: float) -> None:
    new_a, new_b = update(ra, rb, mean_a)
    e_a = expected(ra, rb)
    # Scoring above expectation raises the rating, below lowers it, and the opponent moves the
    # other way; without an upset the total is conserved.
    assert (new_a - ra) * (mean_a - e_a) >= 0
    assert (new_b - rb) * (mean_a - e_a) <= 0
    upset = (ra < rb and mean_a > 0.5) or (rb < ra and mean_a < 0.5)
    if not upset:
        assert new_a + new_b == pytest.approx(ra + rb)
