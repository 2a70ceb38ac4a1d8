"""Uncertainty-driven label selection: probabilities favour unsure turns, sum to the budget,
never reach zero, and the weighted estimate stays unbiased (simulation)."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.stats.active_sampling import (
    SEVERE_EDGE,
    edge_closeness,
    inclusion_probabilities,
    poisson_draw,
    uncertainty,
)
from monitor.stats.ppi import weighted_interval, weighted_terms


def test_uncertainty_signals() -> None:
    assert edge_closeness([SEVERE_EDGE]) == 1.0
    assert edge_closeness([0.95, None]) == 0.0
    assert 0.0 < edge_closeness([0.45]) < 1.0
    assert uncertainty([0.95], panel_disagreed=True, judges_split=False) == 1.0
    assert uncertainty([0.95], panel_disagreed=False, judges_split=True) == 1.0
    assert uncertainty([0.95], panel_disagreed=False, judges_split=False) == 0.0


def test_probabilities_sum_to_the_budget_favour_unsure_turns_and_stay_positive() -> None:
    u = np.array([1.0] * 10 + [0.0] * 990)
    pi = inclusion_probabilities(u, 50)
    assert pi.sum() == pytest.approx(50)
    assert np.all(pi > 0) and np.all(pi <= 1)
    assert pi[:10].min() == 1.0  # capped: every unsure turn is drawn, the excess spread
    assert pi[10:].max() < pi[:10].min()


def test_no_uncertainty_signal_is_refused() -> None:
    with pytest.raises(ValueError, match="no turn carries an uncertainty signal"):
        inclusion_probabilities([0.0, 0.0, 0.0], 2)
    with pytest.raises(ValueError, match="no turns"):
        inclusion_probabilities([], 2)


def test_the_draw_is_reproducible() -> None:
    pi = np.full(100, 0.3)
    assert np.array_equal(poisson_draw(pi, 7), poisson_draw(pi, 7))


def test_the_weighted_estimate_is_unbiased_and_covers_under_uncertain_selection() -> None:
    rng = np.random.default_rng(3)
    size = 5_000
    s = np.clip(np.where(rng.random(size) < 0.8, rng.beta(6, 2, size), rng.beta(2, 4, size)), 0, 1)
    y = (s < 0.31).astype(float)
    judged = np.clip(s + rng.normal(0.0, 0.12, size), 0.0, 1.0)
    f = (judged < 0.31).astype(float)
    u = [uncertainty([j], panel_disagreed=False, judges_split=False) for j in judged]
    pi = inclusion_probabilities(u, 150)
    points, covered, reps = [], 0, 400
    for seed in range(reps):
        interval, _ = weighted_interval(weighted_terms(f, poisson_draw(pi, seed), y, pi))
        assert interval.point is not None and interval.lower is not None
        assert interval.upper is not None
        points.append(interval.point)
        covered += interval.lower <= y.mean() <= interval.upper
    assert abs(np.mean(points) - y.mean()) < 0.005  # the judge alone is off by more
    assert abs(f.mean() - y.mean()) > 0.005
    assert covered / reps >= 0.9


def test_a_labelled_turn_without_a_probability_is_refused() -> None:
    with pytest.raises(ValueError, match="inclusion probability"):
        weighted_terms([1.0, 0.0], [True, False], [1.0, 0.0], [0.0, 0.5])
