"""The judge against the users: cells, rates and kappa, checked against sums done by hand."""

from __future__ import annotations

import pytest

from monitor.stats.judge_user_agreement import CELLS, Agreement, cell


@pytest.mark.parametrize(
    ("band", "polarity", "expected"),
    [
        ("severe", "negative", "agree_unhappy"),
        ("moderate", "negative", "agree_unhappy"),
        ("minor", "negative", "judge_blind"),
        ("none", "negative", "judge_blind"),
        ("severe", "positive", "judge_harsh"),
        ("none", "positive", "agree_happy"),
        ("severe", "neutral", "user_neutral"),
    ],
)
def test_cells(band: str, polarity: str, expected: str) -> None:
    assert cell(band, polarity) == expected
    assert expected in CELLS


def test_a_polarity_that_is_none_of_the_three_is_refused() -> None:
    with pytest.raises(ValueError, match="polarity"):
        cell("none", "angry")


def test_rates_and_kappa() -> None:
    # 30 pairs: judge flags 8 of the 10 unhappy users' turns and 4 of the 20 happy users' turns.
    a = Agreement.of(
        {
            "agree_unhappy": 8,
            "judge_blind": 2,
            "judge_harsh": 4,
            "agree_happy": 16,
            "user_neutral": 5,
        }
    )
    assert a.pairs == 30
    assert a.rate == pytest.approx(24 / 30)
    assert a.blind_rate == pytest.approx(2 / 10)
    assert a.harsh_rate == pytest.approx(4 / 20)
    # Cohen's kappa by its textbook formula: p_o = 0.8; judge flags 12/30, users unhappy 10/30:
    # p_e = 0.4 * (1/3) + 0.6 * (2/3) = 0.5333...; kappa = (0.8 - p_e) / (1 - p_e) = 4/7.
    assert a.kappa == pytest.approx(4 / 7)


def test_no_pairs_no_rates() -> None:
    a = Agreement.of({})
    assert (a.rate, a.blind_rate, a.harsh_rate, a.kappa) == (None, None, None, None)
    # One side that never varies: agreement exists, kappa does not.
    same = Agreement.of({"agree_happy": 5})
    assert same.rate == 1.0
    assert same.kappa is None
