"""Weighted severe shares: unbiased under unequal probabilities, uniform when unweighted."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.stats.weighted_rates import hajek, poststratified, rates


def test_uniform_probabilities_give_the_plain_share() -> None:
    y = [True, False, False, True, False]
    r = hajek(y, [0.1] * 5)
    assert r.point == pytest.approx(0.4)
    assert r.represented == pytest.approx(50.0)
    unweighted = hajek(y, [None] * 5)  # drawn uniformly: weight 1
    assert unweighted.point == pytest.approx(0.4)


def test_weighted_share_is_unbiased_where_the_plain_one_is_not() -> None:
    rng = np.random.default_rng(7)
    cell = rng.integers(0, 2, size=(300, 4000))
    y = rng.random(cell.shape) < np.where(cell == 1, 0.3, 0.02)
    pi = np.where(cell == 1, 0.5, 0.05)
    errors, plain = [], []
    counts = {"a": 0.0, "b": 0.0}
    for k in range(cell.shape[0]):
        drawn = rng.random(cell.shape[1]) < pi[k]
        truth = y[k].mean()
        errors.append(hajek(y[k][drawn], pi[k][drawn]).point - truth)
        plain.append(y[k][drawn].mean() - truth)
        counts = {"a": float((cell[k] == 0).sum()), "b": float((cell[k] == 1).sum())}
        names = ["b" if c else "a" for c in cell[k][drawn]]
        post = poststratified(y[k][drawn], pi[k][drawn], names, counts)
        assert post.empty_cells == ()
    assert abs(np.mean(errors)) < 0.003
    assert np.mean(plain) > 0.1  # the judged turns over-represent the risky cell


def test_interval_covers_and_bad_probabilities_are_refused() -> None:
    r = hajek([True, False, False, False], [0.5, 0.5, 0.25, 0.25])
    iv = r.interval()
    assert iv.lower is not None and iv.upper is not None
    assert iv.lower <= (r.point or 0) <= iv.upper
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        hajek([True], [0.0])
    with pytest.raises(ValueError, match="one inclusion"):
        hajek([True, False], [0.5])
    assert hajek([], []).point is None


def test_per_metric_rates_and_an_empty_cell_named() -> None:
    out = rates({"turn": [True, False], "hallucination": [False, False]}, [0.5, 1.0])
    assert out["turn"].point == pytest.approx(2 / 3)
    assert out["hallucination"].point == 0.0
    post = poststratified([True, False], [0.5, 1.0], ["a", "a"], {"a": 10.0, "b": 5.0})
    assert post.empty_cells == ("b",)
