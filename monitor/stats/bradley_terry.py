"""Bradley-Terry maximum-likelihood ratings on the Elo scale, fitted to all matches played (pure).

DICE's Elo updates once per match, in order: with a Swiss tournament's few matches per
system (six for 32 systems at the default rounds), an early noisy result is never corrected,
and the final ranking falls short of what the matches hold. The matches themselves carry the
information: fitting one strength per system to every question of every match played ranks
them about as well as a round-robin does (bench/tournament.py). This is what Chatbot Arena
does with its pairwise votes: a logistic (Bradley-Terry) model, reported on the Elo scale,

    P(a beats b on a question) = 1 / (1 + 10^((R_b − R_a) / 400)),

each question's score s in [0, 1] counting as s of a win and 1 − s of a loss (a tie is half
of each). A small ridge penalty keeps ratings finite when a system won (or lost) everything,
and the ratings are centred on the initial rating, so a field of equals sits at 1500.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from monitor.stats.elo import INITIAL_RATING, MatchResult
from monitor.stats.lazy import LazyModule

# Imported on the first fit: the CLI imports every command module (tests/monitor/stats/
# test_lazy.py keeps scipy out of processes that never compute a statistic).
_optimize = LazyModule("scipy.optimize")

ELO_SCALE = 400.0
# Ridge penalty on the logit strengths, per system: the prior of about 1 / RIDGE questions'
# worth of a draw against an average system. Small enough not to pull a well-measured system
# (hundreds of questions), large enough to keep an unbeaten one finite.
RIDGE = 0.01
_TOLERANCE = 1e-10


def fit_ratings(
    systems: Sequence[str],
    matches: Iterable[MatchResult],
    *,
    initial: float = INITIAL_RATING,
    ridge: float = RIDGE,
) -> dict[str, float]:
    """Each system's Bradley-Terry rating on the Elo scale, from every judged question of
    ``matches``. Systems without a judged question keep ``initial``."""
    pairs: list[tuple[str, str]] = []
    wins: list[float] = []
    totals: list[float] = []
    for match in matches:
        if match.scores:
            pairs.append((match.a, match.b))
            wins.append(math.fsum(match.scores.values()))
            totals.append(float(len(match.scores)))
    return fit_counts(systems, pairs, wins, totals, initial=initial, ridge=ridge)


def fit_counts(
    systems: Sequence[str],
    pairs: Sequence[tuple[str, str]],
    wins: Sequence[float],
    totals: Sequence[float],
    *,
    initial: float = INITIAL_RATING,
    ridge: float = RIDGE,
) -> dict[str, float]:
    """``fit_ratings`` from per-match counts: ``wins[i]`` of ``totals[i]`` questions won by
    ``pairs[i][0]`` (fractional for ties; a bootstrap passes resampled counts)."""
    if ridge <= 0:
        raise ValueError(f"ridge must be > 0, got {ridge}")
    index = {s: i for i, s in enumerate(systems)}
    n = np.asarray(totals, dtype=float)
    if not len(pairs) or not np.any(n > 0):
        return {s: initial for s in systems}
    a = np.asarray([index[x] for x, _ in pairs])
    b = np.asarray([index[y] for _, y in pairs])
    w = np.asarray(wins, dtype=float)

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        # Negative log-likelihood of the per-match win counts, plus the ridge penalty.
        d = theta[a] - theta[b]
        log_p = -np.logaddexp(0.0, -d)  # log sigmoid(d)
        log_q = -np.logaddexp(0.0, d)  # log sigmoid(-d)
        value = -float(np.sum(w * log_p + (n - w) * log_q)) + 0.5 * ridge * float(theta @ theta)
        residual = n * np.exp(log_p) - w  # expected minus observed wins of a
        grad = ridge * theta
        np.add.at(grad, a, residual)
        np.add.at(grad, b, -residual)
        return value, grad

    fitted = _optimize.minimize(
        objective, np.zeros(len(systems)), jac=True, method="L-BFGS-B", options={"gtol": _TOLERANCE}
    )
    theta = fitted.x - float(np.mean(fitted.x))
    scale = ELO_SCALE / math.log(10.0)
    return {s: initial + scale * float(theta[i]) for s, i in index.items()}


__all__ = ["ELO_SCALE", "RIDGE", "fit_counts", "fit_ratings"]
