"""Labels where they teach most: inclusion probabilities that favour the turns the judge is
least sure of, and the draw (pure; numpy). Active inference (Zrnic & Candes 2024, "Active
statistical inference"): with known probabilities pi_i > 0, the inverse-probability-weighted
estimate (``monitor.stats.ppi.weighted_terms``) stays unbiased whatever the probabilities
are; putting more of them where the judge errs shrinks its variance.

A turn's uncertainty is in [0, 1]:

- 1 when the panel's judges disagreed (the arbiter was called or would have been), or the
  offline heuristic and an LLM judge disagree on whether the turn is severe;
- else its closeness to the severe band's edge: 1 at the edge, falling linearly to 0 at
  ``EDGE_SPAN`` away, over S_final and the critical metrics' scores (a judge's error near the
  edge flips the severe call; far from it, it does not).

Probabilities: pi_i = n * (floor / N + (1 - floor) * u_i / sum(u)), capped at 1 with the excess
handed to the others, so the expected number drawn is n and every turn keeps at least
n * floor / N (a turn the signals call certain can still be drawn: the estimate needs it).
The draw is Poisson sampling (each turn independently with its pi_i), so pi_i is exactly the
probability the estimate divides by.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from monitor.schema.turn import METRICS, Band, TurnSignals
from monitor.scoring.turn import lower_edge, turn_band

SEVERE_EDGE = lower_edge(Band.MODERATE)  # the lowest score that is not severe
EDGE_SPAN = 0.30  # a judge reading a score 0.1-0.2 off still flips the call at 0.2 away
DEFAULT_FLOOR = 0.2


def edge_closeness(scores: Iterable[float | None]) -> float:
    """1 at the severe edge, 0 at ``EDGE_SPAN`` or more from it (the closest score counts)."""
    best = 0.0
    for s in scores:
        if s is None:
            continue
        best = max(best, 1.0 - abs(float(s) - SEVERE_EDGE) / EDGE_SPAN)
    return best


def uncertainty(
    scores: Iterable[float | None], *, panel_disagreed: bool, judges_split: bool
) -> float:
    if panel_disagreed or judges_split:
        return 1.0
    return edge_closeness(scores)


def _severe(
    scores: Mapping[str, float], weights: Mapping[str, float], critical: Sequence[str]
) -> bool:
    return turn_band(scores, weights, critical) is Band.SEVERE


def turn_uncertainty(
    signals: TurnSignals, *, weights: Mapping[str, float], critical: Sequence[str]
) -> float:
    """A stored turn's uncertainty from its newest verdict and the judgments behind it."""
    complete = [(k, s) for k, s in signals.judgments if all(m in s for m in METRICS)]
    heuristic = {_severe(s, weights, critical) for k, s in complete if k == "heuristic"}
    llm = {_severe(s, weights, critical) for k, s in complete if k != "heuristic"}
    split = bool(heuristic and llm and heuristic != llm)
    scores = [signals.s_final, *(signals.metric_scores.get(m) for m in critical)]
    return uncertainty(
        scores, panel_disagreed=signals.arbitration_trigger is not None, judges_split=split
    )


def inclusion_probabilities(
    uncertainties: Iterable[float], n: int, *, floor: float = DEFAULT_FLOOR
) -> np.ndarray:
    """Probabilities with sum ``min(n, N)``; ValueError when no turn carries any uncertainty
    (the draw would be uniform: say so rather than pretend)."""
    u = np.clip(np.asarray(list(uncertainties), dtype=float), 0.0, 1.0)
    big_n = u.size
    if big_n == 0:
        raise ValueError("no turns to draw from")
    if not 0.0 < floor <= 1.0:
        raise ValueError(f"floor must be in (0, 1], got {floor}")
    if u.sum() <= 0:
        raise ValueError("no turn carries an uncertainty signal")
    target = float(min(n, big_n))
    share = floor / big_n + (1.0 - floor) * u / u.sum()
    pi = np.zeros(big_n)
    capped = np.zeros(big_n, dtype=bool)
    # Cap at 1 and spread what the capped turns cannot take over the others, until none exceeds.
    for _ in range(big_n):
        left = target - capped.sum()
        free = ~capped
        pi[free] = left * share[free] / share[free].sum()
        pi[capped] = 1.0
        over = free & (pi > 1.0)
        if not over.any():
            break
        capped |= over
    return np.asarray(np.minimum(pi, 1.0))


def poisson_draw(probabilities: np.ndarray, seed: int) -> np.ndarray:
    """Each turn independently with its probability: the same probabilities and seed always
    draw the same turns."""
    rng = np.random.default_rng(seed)
    return np.asarray(rng.random(probabilities.size) < probabilities)
