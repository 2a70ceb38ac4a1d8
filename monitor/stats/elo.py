"""Elo ratings of DICE (§3.3, eqs. 5-6), pure.

One update per match (a set of questions both systems answered):

    R'_A = R_A + K_A · (S_total^A / N_questions − E_A),   E_A = 1 / (1 + 10^((R_B − R_A)/400))

K is amplified on upsets ("amplifying K-factors when lower-rated systems outperform
higher-rated opponents"): when the lower-rated system scores more than half the questions,
its K is multiplied by 1 + |R_A − R_B| / 400 and its opponent's by 1 + |R_A − R_B| / 600
(the proportions of the authors' reference implementation), so a surprise moves both ratings
faster and the ranking converges in fewer rounds. Without an upset both use K.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

INITIAL_RATING = 1500.0
DEFAULT_K = 32.0


@dataclass(frozen=True)
class EloConfig:
    k: float = DEFAULT_K
    initial: float = INITIAL_RATING
    upset_winner_scale: float = 400.0  # K × (1 + ΔR / this) for the lower-rated winner
    upset_loser_scale: float = 600.0  # K × (1 + ΔR / this) for the higher-rated loser

    def __post_init__(self) -> None:
        if self.k <= 0:
            raise ValueError(f"Elo K must be > 0, got {self.k}")
        if self.upset_winner_scale <= 0 or self.upset_loser_scale <= 0:
            raise ValueError("upset scales must be > 0")


DEFAULT_ELO = EloConfig()


@dataclass(frozen=True)
class MatchResult:
    """One match: ``a`` vs ``b`` over some questions; ``scores`` are a's per-question scores
    in [0, 1] (b scored 1 − each), keyed by question id so resampling can pick questions."""

    a: str
    b: str
    scores: Mapping[str, float]

    def __post_init__(self) -> None:
        if self.a == self.b:
            raise ValueError(f"a system cannot play itself ({self.a!r})")
        for qid, score in self.scores.items():
            if not 0.0 <= score <= 1.0:
                raise ValueError(f"score of question {qid!r} is {score}, not in [0, 1]")

    @property
    def mean_a(self) -> float | None:
        """S_total^A / N_questions, None when no question was judged."""
        if not self.scores:
            return None
        return sum(self.scores.values()) / len(self.scores)


def expected(rating_a: float, rating_b: float) -> float:
    """Eq. 6: the expected score of A against B."""
    return 1.0 / (1.0 + float(10.0 ** ((rating_b - rating_a) / 400.0)))


def update(
    rating_a: float, rating_b: float, mean_a: float, config: EloConfig = DEFAULT_ELO
) -> tuple[float, float]:
    """Eq. 5 for both systems, with the upset-amplified K. ``mean_a`` = S_total^A / N."""
    if not 0.0 <= mean_a <= 1.0:
        raise ValueError(f"mean score must be in [0, 1], got {mean_a}")
    e_a = expected(rating_a, rating_b)
    diff = abs(rating_a - rating_b)
    k_a = k_b = config.k
    a_upset = rating_a < rating_b and mean_a > 0.5
    b_upset = rating_b < rating_a and mean_a < 0.5
    if a_upset:
        k_a = config.k * (1.0 + diff / config.upset_winner_scale)
        k_b = config.k * (1.0 + diff / config.upset_loser_scale)
    elif b_upset:
        k_b = config.k * (1.0 + diff / config.upset_winner_scale)
        k_a = config.k * (1.0 + diff / config.upset_loser_scale)
    return (
        rating_a + k_a * (mean_a - e_a),
        rating_b + k_b * ((1.0 - mean_a) - (1.0 - e_a)),
    )


def apply(ratings: dict[str, float], match: MatchResult, config: EloConfig = DEFAULT_ELO) -> None:
    """Update ``ratings`` in place with one match (unknown systems start at the initial
    rating; a match without judged questions changes nothing)."""
    mean_a = match.mean_a
    if mean_a is None:
        return
    ra = ratings.setdefault(match.a, config.initial)
    rb = ratings.setdefault(match.b, config.initial)
    ratings[match.a], ratings[match.b] = update(ra, rb, mean_a, config)


def replay(
    systems: Iterable[str], matches: Iterable[MatchResult], config: EloConfig = DEFAULT_ELO
) -> dict[str, float]:
    """Ratings after playing ``matches`` in order, everyone starting at the initial rating."""
    ratings = {name: config.initial for name in systems}
    for match in matches:
        apply(ratings, match, config)
    return ratings


__all__ = [
    "DEFAULT_ELO",
    "DEFAULT_K",
    "INITIAL_RATING",
    "EloConfig",
    "MatchResult",
    "apply",
    "expected",
    "replay",
    "update",
]
