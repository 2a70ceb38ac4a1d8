"""Swiss pairing (no repeats, byes, ~log2 n rounds), round-robin, bootstrap intervals."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.errors import NoPairing
from monitor.stats.bradley_terry import fit_ratings
from monitor.stats.elo import MatchResult
from monitor.stats.tournament import (
    bootstrap_intervals,
    default_rounds,
    pair_key,
    round_robin,
    round_robin_matches,
    swiss,
    swiss_pairing,
)

QUESTIONS = [f"q{i}" for i in range(10)]


def by_strength(strength: dict[str, float]):  # type: ignore[no-untyped-def]
    """Deterministic matches: the stronger system takes each question, equal ones tie."""

    def play(a: str, b: str) -> dict[str, float]:
        if strength[a] == strength[b]:
            return dict.fromkeys(QUESTIONS, 0.5)
        return dict.fromkeys(QUESTIONS, 1.0 if strength[a] > strength[b] else 0.0)

    return play


def noisy(seed: int, strength: dict[str, float]):  # type: ignore[no-untyped-def]
    rng = random.Random(seed)

    def play(a: str, b: str) -> dict[str, float]:
        p = 1 / (1 + math.exp(strength[b] - strength[a]))
        return {q: 1.0 if rng.random() < p else 0.0 for q in QUESTIONS}

    return play


def test_dice_worked_example_eight_systems_four_rounds_sixteen_matches() -> None:
    """DICE's worked example: 8 systems take 4 Swiss rounds, 16 matches instead of the round
    robin's 28, and the order of strength comes out."""
    systems = [f"s{i}" for i in range(1, 9)]
    strength = {s: -i for i, s in enumerate(systems)}  # s1 strongest
    result = swiss(systems, by_strength(strength))
    assert default_rounds(8) == 4
    assert len(result.rounds) == 4 and result.match_count == 16
    assert round_robin_matches(8) == 28
    assert result.ranking()[0] == "s1" and result.ranking()[-1] == "s8"


def has_pairing(systems: list[str], played: set[frozenset[str]]) -> bool:
    """Brute force, independent of the pairing code: can ``systems`` all be paired anew?"""
    if not systems:
        return True
    first, rest = systems[0], systems[1:]
    return any(
        pair_key(first, other) not in played
        and has_pairing([s for s in rest if s != other], played)
        for other in rest
    )


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=2, max_value=24), st.integers(min_value=0, max_value=10_000))
def test_swiss_never_repeats_a_pair_and_plays_each_system_once_a_round(n: int, seed: int) -> None:
    systems = [f"s{i}" for i in range(n)]
    strength = {s: random.Random(seed + i).gauss(0, 1) for i, s in enumerate(systems)}
    result = swiss(systems, noisy(seed, strength))
    keys = [pair_key(m.a, m.b) for m in result.matches]
    assert len(keys) == len(set(keys)), "a pair met twice"
    assert len(result.rounds) == default_rounds(n)
    assert default_rounds(n) <= math.ceil(math.log2(n)) + 1
    for r in result.rounds:
        seen = Counter(s for pair in r.pairs for s in pair)
        assert all(c == 1 for c in seen.values())
        assert len(seen) + (r.bye is not None) == n
        assert (r.bye is not None) == (n % 2 == 1)
    # A second bye only when no system without one can take it: every such system, sat out,
    # would leave the others with no pairing free of a repeat.
    played: set[frozenset[str]] = set()
    had_bye: set[str] = set()
    for r in result.rounds:
        if r.bye is not None and r.bye in had_bye:
            for other in set(systems) - had_bye:
                rest = [s for s in systems if s != other]
                assert not has_pairing(rest, played), f"{other} could have sat out"
        if r.bye is not None:
            had_bye.add(r.bye)
        played |= {pair_key(a, b) for a, b in r.pairs}
    assert result.match_count == len(result.rounds) * (n // 2)


def test_swiss_ends_when_every_pair_has_met() -> None:
    systems = ["a", "b", "c", "d"]
    result = swiss(systems, by_strength({"a": 3, "b": 2, "c": 1, "d": 0}), rounds=10)
    assert len(result.rounds) == 3 and result.match_count == 6  # then only repeats remain


def test_pairing_backtracks_instead_of_stranding_a_system() -> None:
    # Greedy top-down would pair a-b, then c-d has already met: backtracking finds a-c, b-d.
    ratings = dict.fromkeys("abcd", 1500.0)
    played = {pair_key("c", "d")}
    this_round = swiss_pairing(ratings, list("abcd"), played, set())
    assert set(map(frozenset, this_round.pairs)).isdisjoint(played)
    with pytest.raises(NoPairing):
        swiss_pairing(ratings, list("ab"), {pair_key("a", "b")}, set())


def test_round_robin_plays_every_pair_once() -> None:
    systems = [f"s{i}" for i in range(7)]
    strength = {s: i for i, s in enumerate(systems)}
    result = round_robin(systems, by_strength(strength), rng=random.Random(1))
    keys = {pair_key(m.a, m.b) for m in result.matches}
    assert len(keys) == result.match_count == 21
    assert result.ranking() == list(reversed(systems))


def test_tournaments_refuse_bad_systems() -> None:
    with pytest.raises(ValueError, match="unique"):
        swiss(["a", "a"], by_strength({"a": 1}))
    with pytest.raises(ValueError, match="two"):
        round_robin(["a"], by_strength({"a": 1}))


def test_bootstrap_intervals_cover_the_ratings_and_shrink_with_clear_results() -> None:
    systems = ["a", "b", "c"]
    many = [f"q{i}" for i in range(40)]
    mixed = [
        MatchResult("a", "b", {q: float(i % 4 != 0) for i, q in enumerate(many)}),
        MatchResult("b", "c", {q: float(i % 2) for i, q in enumerate(many)}),
    ]
    intervals = bootstrap_intervals(systems, mixed, resamples=300, seed=3)
    fitted = fit_ratings(systems, mixed)
    for s in systems:
        assert intervals[s].low < fitted[s] < intervals[s].high
    assert intervals["a"].low > 1500  # a won 75 % of 40 questions: clearly above the field
    # b and c drew half of their questions: not separable.
    assert intervals["c"].low < fitted["b"] < intervals["c"].high
    unanimous = [MatchResult("a", "b", dict.fromkeys(QUESTIONS, 1.0))]
    tight = bootstrap_intervals(["a", "b"], unanimous, resamples=50)
    # Every resample is the same match: one fit, a point interval.
    assert tight["a"].low == pytest.approx(tight["a"].high)
    assert tight["a"].low == pytest.approx(fit_ratings(["a", "b"], unanimous)["a"])
    empty = bootstrap_intervals(["a", "b"], [MatchResult("a", "b", {})], resamples=5)
    assert empty["a"].low == empty["a"].high == 1500.0
    with pytest.raises(ValueError, match="resamples"):
        bootstrap_intervals(systems, mixed, resamples=0)
