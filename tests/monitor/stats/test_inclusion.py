"""The cascade's inclusion probabilities: risk per cell, floor, budget, conversation draw."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.sampling.sampler import sample_point
from monitor.stats.inclusion import Pairs, allocate, draws, expected_calls, pooled_rate, risks

TRAFFIC = {"severe": 50.0, "moderate": 200.0, "minor": 300.0, "none": 450.0}


def test_probability_grows_with_the_risk_and_spends_the_target() -> None:
    risk = {"severe": 0.5, "moderate": 0.1, "minor": 0.03, "none": 0.01}
    pi = allocate(TRAFFIC, risk, 100.0, floor=0.01)
    assert pi["severe"] > pi["moderate"] > pi["minor"] > pi["none"] >= 0.01
    assert expected_calls(TRAFFIC, pi) == pytest.approx(100.0, rel=1e-6)


def test_a_useless_cheap_look_gives_the_uniform_rate() -> None:
    # Every cell at the same risk: the same probability everywhere, the uniform draw again.
    same = dict.fromkeys(TRAFFIC, 0.05)
    pi = allocate(TRAFFIC, same, 100.0)
    assert list(pi.values()) == pytest.approx([0.1] * 4)


def test_probability_is_never_zero() -> None:
    # A cell the LLM never called severe, a zero budget: the floor still draws it.
    pi = allocate(TRAFFIC, {"severe": 1.0, "moderate": 0.0, "minor": 0.0, "none": 0.0}, 0.0)
    assert min(pi.values()) == pytest.approx(0.02 / 2)
    pi = allocate(TRAFFIC, dict.fromkeys(TRAFFIC, 0.0), 300.0, floor=0.05)
    assert set(pi.values()) == {0.05}


def test_a_budget_above_the_traffic_judges_everything() -> None:
    pi = allocate(TRAFFIC, {"severe": 0.5, "moderate": 0.1, "minor": 0.03, "none": 0.01}, 5000)
    assert set(pi.values()) == {1.0}


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="floor"):
        allocate(TRAFFIC, {}, 10.0, floor=0.0)
    with pytest.raises(ValueError, match="target"):
        allocate(TRAFFIC, {}, -1.0)
    with pytest.raises(ValueError, match="traffic"):
        allocate({"a": -1.0}, {}, 1.0)
    with pytest.raises(ValueError, match="severe"):
        Pairs(3, 4)


def test_risks_lean_on_the_pooled_rate_until_a_cell_has_pairs() -> None:
    cells = {"severe": Pairs(100, 60), "none": Pairs(0, 0)}
    r = risks(cells, ["severe", "none"])
    assert r["none"] == pytest.approx(pooled_rate(cells))
    assert r["severe"] > r["none"]
    assert 0.5 < r["severe"] < 0.6  # 60 % shrunk toward the pooled rate by the prior


def test_the_draw_is_the_conversation_point_against_the_probability() -> None:
    points = np.array([sample_point(f"conversation-{i}") for i in range(20_000)])
    drawn = np.array([draws(p, 0.07) for p in points])
    assert abs(drawn.mean() - 0.07) < 0.01
    # The same conversation at a larger probability is drawn whenever it was at a smaller one.
    assert all(draws(p, 0.2) for p in points[drawn])
