"""How likely each turn is to reach the LLM judge, from the cheap look at it (pure; numpy-free).

The cheap look is the offline heuristic judge's band for the turn (its ``cell``; the identifier
tripwire is an always-judge rule and bypasses this). The LLM judge is the reference: what the
cheap look is worth is measured online, from the turns both have judged (pairs), per cell:

    risk_c = P(LLM judge calls the turn severe | the cheap look put it in cell c)

estimated with a Beta prior centred on the pooled severe rate (``PRIOR_PAIRS`` pseudo-pairs), so
a cell with few pairs sits at the pooled rate and a useless cheap look (every cell at the same
rate) gives every cell the same probability: the uniform draw again. In a cell where the cheap
look says "not severe" (the bulk of traffic) ``risk_c`` is exactly the probability that its
band is wrong about the LLM judge's.

Allocation (Neyman's for an inverse-probability-weighted count of severe turns, whose variance
is sum_c N_c E[y^2 | c] / pi_c): pi_c = min(1, max(floor, lam * sqrt(risk_c))), with lam the
one scale at which the expected LLM calls sum_c N_c pi_c meet the target (bisection: the sum is
increasing in lam). The floor keeps every probability > 0, so every weight 1/pi is finite and
every estimate unbiased; when the floor alone spends more than the target, every cell gets the
floor (the hourly budget then refuses what it cannot pay, counted as usual).

The draw is conversation-consistent (``draws``): the conversation's fixed point in [0, 1) (the
sampler's hash) against pi, so P(drawn) = pi exactly and, within a conversation, a turn with a
larger pi is drawn whenever one with a smaller pi was.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

PRIOR_PAIRS = 20.0  # pseudo-pairs at the pooled rate per cell
DEFAULT_FLOOR = 0.01
DEFAULT_POWER = 1.0
_BISECTIONS = 60


@dataclass(frozen=True)
class Pairs:
    """Turns of one cell that the LLM judge judged too, and how many it called severe."""

    judged: int = 0
    severe: int = 0

    def __post_init__(self) -> None:
        if self.judged < 0 or not 0 <= self.severe <= self.judged:
            raise ValueError(f"need 0 <= severe <= judged, got {self.severe}/{self.judged}")

    def add(self, severe: bool) -> Pairs:
        return Pairs(self.judged + 1, self.severe + int(severe))


def pooled_rate(pairs: Mapping[str, Pairs]) -> float:
    """The severe rate over every pair, with one pseudo-pair on each side (never 0 or 1)."""
    judged = sum(p.judged for p in pairs.values())
    severe = sum(p.severe for p in pairs.values())
    return (severe + 1.0) / (judged + 2.0)


def risks(
    cells: Mapping[str, Pairs] | None, names: list[str], *, prior_pairs: float = PRIOR_PAIRS
) -> dict[str, float]:
    """risk_c for each cell of ``names`` (a cell without pairs: the pooled rate)."""
    cells = cells or {}
    pooled = pooled_rate(cells)
    out: dict[str, float] = {}
    for name in names:
        p = cells.get(name, Pairs())
        out[name] = (p.severe + prior_pairs * pooled) / (p.judged + prior_pairs)
    return out


def allocate(
    traffic: Mapping[str, float],
    risk: Mapping[str, float],
    target: float,
    *,
    floor: float = DEFAULT_FLOOR,
    power: float = DEFAULT_POWER,
    cap: float = 1.0,
) -> dict[str, float]:
    """pi per cell of ``traffic`` (turns per unit of time) spending ``target`` calls per the
    same unit, none above ``cap``. A cell missing from ``risk`` counts at the largest risk
    known (never starved)."""
    if not 0.0 < floor <= cap <= 1.0:
        raise ValueError(f"need 0 < floor <= cap <= 1, got floor {floor}, cap {cap}")
    if target < 0 or not math.isfinite(target):
        raise ValueError(f"target must be a finite number >= 0, got {target}")
    if any(n < 0 or not math.isfinite(n) for n in traffic.values()):
        raise ValueError("traffic must be finite and >= 0 in every cell")
    top = max((r for r in risk.values()), default=1.0)
    if not 0.0 < power <= 2.0:
        raise ValueError(f"power must be in (0, 2], got {power}")
    root = {c: max(0.0, min(1.0, risk.get(c, top))) ** power for c in traffic}

    def probabilities(lam: float) -> dict[str, float]:
        return {c: min(cap, max(floor, lam * root[c])) for c in traffic}

    def spend(lam: float) -> float:
        return sum(traffic[c] * p for c, p in probabilities(lam).items())

    if spend(0.0) >= target:
        return probabilities(0.0)  # the floor alone meets or exceeds the target
    positive = [r for r in root.values() if r > 0.0]
    if not positive:
        return probabilities(0.0)  # no cell carries any risk: the floor is all there is
    hi = cap / min(positive)  # every cell with a risk at the cap
    if spend(hi) <= target:
        return probabilities(hi)
    lo = 0.0
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2.0
        if spend(mid) < target:
            lo = mid
        else:
            hi = mid
    return probabilities(lo)  # the side that spends at most the target


def draws(point: float, probability: float) -> bool:
    """Whether a turn whose conversation sits at ``point`` in [0, 1) is drawn with
    ``probability``: P(drawn) = probability for a uniform point."""
    return point < probability


def expected_calls(traffic: Mapping[str, float], probabilities: Mapping[str, float]) -> float:
    return sum(n * probabilities.get(c, 1.0) for c, n in traffic.items())
