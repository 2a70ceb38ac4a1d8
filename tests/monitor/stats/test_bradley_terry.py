"""Bradley-Terry ratings fitted to all matches: recovery, order independence,
finite ratings for an unbeaten system, and a Swiss tournament ranking 32 noisy systems."""

from __future__ import annotations

import math
import random
import statistics

import pytest
from scipy.stats import spearmanr

from monitor.stats.bradley_terry import fit_ratings
from monitor.stats.elo import MatchResult
from monitor.stats.tournament import default_rounds, swiss

QUESTIONS = [f"q{i}" for i in range(20)]


def _bt_judge(theta: dict[str, float], rng: random.Random):  # type: ignore[no-untyped-def]
    """Each question one Bradley-Terry-Davidson outcome (ties at nu = 0.5), as in the bench."""

    def play(a: str, b: str) -> dict[str, float]:
        sa, sb = math.exp(theta[a]), math.exp(theta[b])
        tie = 0.5 * math.sqrt(sa * sb)
        p_a, p_tie = sa / (sa + sb + tie), tie / (sa + sb + tie)
        out = {}
        for q in QUESTIONS:
            u = rng.random()
            out[q] = 1.0 if u < p_a else 0.5 if u < p_a + p_tie else 0.0
        return out

    return play


def test_the_fit_recovers_the_logit_gap_on_the_elo_scale() -> None:
    # a beats b on 3 of 4 questions over many questions: log-odds ln 3, 400·log10(3) Elo.
    many = {f"q{i}": float(i % 4 != 0) for i in range(4000)}
    ratings = fit_ratings(["a", "b"], [MatchResult("a", "b", many)], ridge=1e-9)
    assert ratings["a"] - ratings["b"] == pytest.approx(400 * math.log10(3), rel=1e-3)
    assert (ratings["a"] + ratings["b"]) / 2 == pytest.approx(1500)


def test_the_fit_does_not_depend_on_the_order_of_the_matches() -> None:
    rng = random.Random(7)
    theta = {s: rng.uniform(-1, 1) for s in "abcdef"}
    play = _bt_judge(theta, rng)
    matches = [MatchResult(a, b, play(a, b)) for a in "abcdef" for b in "abcdef" if a < b]
    forward = fit_ratings(list(theta), matches)
    backward = fit_ratings(list(theta), list(reversed(matches)))
    assert forward == pytest.approx(backward, abs=1e-6)


def test_an_unbeaten_system_gets_a_finite_rating_and_an_unplayed_one_the_initial() -> None:
    matches = [MatchResult("a", "b", dict.fromkeys(QUESTIONS, 1.0))]
    ratings = fit_ratings(["a", "b", "idle"], matches)
    assert all(math.isfinite(r) for r in ratings.values())
    assert ratings["a"] > ratings["idle"] > ratings["b"]
    assert fit_ratings(["a", "b"], [MatchResult("a", "b", {})]) == {"a": 1500.0, "b": 1500.0}


def test_a_swiss_tournament_ranks_32_noisy_systems_as_the_issue_asks() -> None:
    # With DICE's sequential Elo the median Spearman fell short of 0.95 at the
    # default 6 rounds (96 of round-robin's 496 matches). The fit to all matches reaches it.
    n = 32
    values = []
    for seed in range(15):
        rng = random.Random(seed * 1000 + n)
        systems = [f"s{i:02d}" for i in range(n)]
        theta = {s: 3.0 * (1 - i / (n - 1)) for i, s in enumerate(systems)}
        order = systems[:]
        rng.shuffle(order)
        result = swiss(order, _bt_judge(theta, rng), rounds=default_rounds(n))
        assert result.match_count <= 0.30 * n * (n - 1) / 2
        ranks = {s: i for i, s in enumerate(result.ranking())}
        values.append(spearmanr([ranks[s] for s in systems], range(n)).statistic)
    assert statistics.median(values) >= 0.95
