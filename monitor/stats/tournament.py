"""Swiss-system and round-robin tournaments with Elo, and bootstrap intervals (pure).

DICE Algorithm 1: everyone starts at 1500; each round pairs systems by current rating
without repeating a pair, plays the matches, updates Elo after each one. The final ratings
are a Bradley-Terry fit to every match played, on the Elo scale (``bradley_terry``, as
Chatbot Arena rates): sequential Elo, six updates a system for 32 systems, cannot correct an
early noisy result, while the matches hold the information. DICE's Elo
trajectory is kept (``TournamentResult.elo``): it is what each round paired by. With n systems,
``default_rounds(n)`` = ⌈log2 n⌉ + 1 rounds (8 systems: 4 rounds, 16 matches instead of 28).
An odd count gives one system a bye per round: the lowest-rated one that has not had one yet.

The judge is a callback ``play(a, b) -> {question_id: score of a}``, so the same code runs
real pairwise judgments (the CLI) and simulated outcomes (bench/tournament.py).

Confidence intervals resample the questions (with replacement, the same draw for every
match, since all systems answer the same questions) and refit the ratings to the matches
that were played; the 2.5th and 97.5th percentiles of each system's rating over the
resamples give its 95 % interval.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from monitor.errors import NoPairing
from monitor.stats.bradley_terry import fit_counts, fit_ratings
from monitor.stats.elo import DEFAULT_ELO, EloConfig, MatchResult, apply

Play = Callable[[str, str], Mapping[str, float]]


@dataclass(frozen=True)
class Round:
    pairs: tuple[tuple[str, str], ...]
    bye: str | None = None


@dataclass
class TournamentResult:
    """``ratings``: the Bradley-Terry fit to every match (the ranking); ``elo``: DICE's
    sequential Elo after the last match (what the rounds paired by)."""

    systems: tuple[str, ...]
    ratings: dict[str, float]
    matches: list[MatchResult] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)
    elo: dict[str, float] = field(default_factory=dict)

    def fit(self, config: EloConfig) -> None:
        """Final ratings from all matches played; the Elo trajectory's end kept in ``elo``."""
        self.elo = dict(self.ratings)
        self.ratings = fit_ratings(self.systems, self.matches, initial=config.initial)

    @property
    def match_count(self) -> int:
        return len(self.matches)

    def ranking(self) -> list[str]:
        """Systems from the highest rating to the lowest (name breaks ties)."""
        return sorted(self.systems, key=lambda s: (-self.ratings[s], s))


def default_rounds(n_systems: int) -> int:
    """⌈log2 n⌉ + 1 (DICE: 8 systems → 4 rounds), capped at a round-robin's n − 1."""
    if n_systems < 2:
        return 0
    return min(math.ceil(math.log2(n_systems)) + 1, max_rounds(n_systems))


def max_rounds(n_systems: int) -> int:
    """Rounds after which every pair has met (n − 1 for even n, n for odd n with byes)."""
    return n_systems - 1 if n_systems % 2 == 0 else n_systems


def round_robin_matches(n_systems: int) -> int:
    return n_systems * (n_systems - 1) // 2


def pair_key(a: str, b: str) -> frozenset[str]:
    return frozenset((a, b))


def swiss_pairing(
    ratings: Mapping[str, float],
    order: Sequence[str],
    played: set[frozenset[str]],
    byes: set[str],
    *,
    lookahead: bool = True,
) -> Round:
    """Pair ``order``'s systems by current rating (highest first; ``order`` breaks ties)
    so that no pair in ``played`` meets again. Each system takes the nearest-rated opponent
    it has not met, backtracking when that would leave someone unpairable. With
    ``lookahead`` the first such pairing that still leaves a legal pairing for the next round
    is preferred (6 systems can otherwise be stuck after 3 rounds: two triangles of unplayed
    pairs have no pairing).

    Raises NoPairing when no pairing without a repeat exists."""
    position = {name: i for i, name in enumerate(order)}
    ranked = sorted(order, key=lambda s: (-ratings[s], position[s]))
    if len(ranked) % 2 == 0:
        pairs = _best(ranked, played, lookahead)
        if pairs is None:
            raise NoPairing("no pairing without a repeated match is left")
        return Round(tuple(pairs))
    # Odd count: the bye goes to the lowest-rated system without one (then the others).
    lowest_first = list(reversed(ranked))
    candidates = [s for s in lowest_first if s not in byes] + [s for s in lowest_first if s in byes]
    for candidate in candidates:
        pairs = _best([s for s in ranked if s != candidate], played, lookahead)
        if pairs is not None:
            return Round(tuple(pairs), candidate)
    raise NoPairing("no pairing without a repeated match is left")


# Pairings examined for the lookahead before settling for the first legal one.
_LOOKAHEAD_CANDIDATES = 64


def _best(
    ranked: list[str], played: set[frozenset[str]], lookahead: bool
) -> list[tuple[str, str]] | None:
    first: list[tuple[str, str]] | None = None
    for n, pairs in enumerate(_matchings(ranked, played)):
        if first is None:
            first = pairs
            if not lookahead:
                break
        after = played | {pair_key(a, b) for a, b in pairs}
        if next(_matchings(ranked, after), None) is not None:
            return pairs
        if n + 1 >= _LOOKAHEAD_CANDIDATES:
            break
    return first


def _matchings(ranked: list[str], played: set[frozenset[str]]) -> Iterator[list[tuple[str, str]]]:
    """Legal pairings, best first: the top unpaired system takes the nearest-ranked
    opponent it has not met (depth-first, so the first one yielded is the greedy one when
    greedy works)."""
    if not ranked:
        yield []
        return
    top, rest = ranked[0], ranked[1:]
    for i, opponent in enumerate(rest):
        if pair_key(top, opponent) in played:
            continue
        for tail in _matchings(rest[:i] + rest[i + 1 :], played):
            yield [(top, opponent), *tail]


def swiss(
    systems: Sequence[str],
    play: Play,
    rounds: int | None = None,
    config: EloConfig = DEFAULT_ELO,
) -> TournamentResult:
    """DICE Algorithm 1. Stops early when no pairing without repeats is left."""
    _check_systems(systems)
    n_rounds = default_rounds(len(systems)) if rounds is None else rounds
    if n_rounds < 0:
        raise ValueError(f"rounds must be >= 0, got {n_rounds}")
    result = TournamentResult(tuple(systems), {s: config.initial for s in systems})
    played: set[frozenset[str]] = set()
    byes: set[str] = set()
    for _ in range(n_rounds):
        try:
            this_round = swiss_pairing(result.ratings, systems, played, byes)
        except NoPairing:
            break
        result.rounds.append(this_round)
        if this_round.bye is not None:
            byes.add(this_round.bye)
        for a, b in this_round.pairs:
            match = MatchResult(a, b, dict(play(a, b)))
            played.add(pair_key(a, b))
            result.matches.append(match)
            apply(result.ratings, match, config)
    result.fit(config)
    return result


def round_robin(
    systems: Sequence[str],
    play: Play,
    config: EloConfig = DEFAULT_ELO,
    rng: random.Random | None = None,
) -> TournamentResult:
    """Every pair once. The sequential Elo (``elo``) is order-dependent, so the matches are
    played in a shuffled order (``rng``; the given order without one); the fitted ratings
    are not."""
    _check_systems(systems)
    pairs = list(itertools.combinations(systems, 2))
    if rng is not None:
        rng.shuffle(pairs)
    result = TournamentResult(tuple(systems), {s: config.initial for s in systems})
    result.rounds.append(Round(tuple(pairs)))
    for a, b in pairs:
        match = MatchResult(a, b, dict(play(a, b)))
        result.matches.append(match)
        apply(result.ratings, match, config)
    result.fit(config)
    return result


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


def bootstrap_intervals(
    systems: Sequence[str],
    matches: Sequence[MatchResult],
    *,
    resamples: int = 1000,
    confidence: float = 0.95,
    config: EloConfig = DEFAULT_ELO,
    seed: int = 0,
) -> dict[str, Interval]:
    """Percentile intervals of each final rating over question resamples (module docstring).
    Without any judged question every interval is the initial rating itself."""
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    questions = sorted({q for m in matches for q in m.scores})
    if not questions:
        return {s: Interval(config.initial, config.initial) for s in systems}
    column = {q: i for i, q in enumerate(questions)}
    played = [m for m in matches if m.scores]
    pairs = [(m.a, m.b) for m in played]
    # scores[i, j]: a's score on question j of match i; asked[i, j]: 1 if it was judged.
    scores = np.zeros((len(played), len(questions)))
    asked = np.zeros_like(scores)
    for i, m in enumerate(played):
        for q, score in m.scores.items():
            scores[i, column[q]] = score
            asked[i, column[q]] = 1.0
    rng = np.random.default_rng(seed)
    samples: dict[str, list[float]] = {s: [] for s in systems}
    for _ in range(resamples):
        draw = rng.integers(0, len(questions), size=len(questions))
        weights = np.bincount(draw, minlength=len(questions)).astype(float)
        refit = fit_counts(
            systems, pairs, scores @ weights, asked @ weights, initial=config.initial
        )
        for s in systems:
            samples[s].append(refit[s])
    alpha = (1.0 - confidence) / 2.0
    return {
        s: Interval(
            float(np.quantile(samples[s], alpha)), float(np.quantile(samples[s], 1.0 - alpha))
        )
        for s in systems
    }


def _check_systems(systems: Sequence[str]) -> None:
    if len(set(systems)) != len(systems):
        raise ValueError("system names must be unique")
    if len(systems) < 2:
        raise ValueError("a tournament needs at least two systems")


__all__ = [
    "Interval",
    "NoPairing",
    "Play",
    "Round",
    "TournamentResult",
    "bootstrap_intervals",
    "default_rounds",
    "max_rounds",
    "pair_key",
    "round_robin",
    "round_robin_matches",
    "swiss",
    "swiss_pairing",
]
