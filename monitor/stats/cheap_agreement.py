"""How well the cascade's cheap look follows the LLM judge, from stored pairs (pure).

Per cell (the cheap look's band): the judged turns, the LLM judge's weighted severe rate there
(the risk the cascade allocates by), and overall the AUROC of the cheap band as a score for the
LLM's severe call (severe > moderate > minor > none; ties count half), each pair weighted by
1/pi so a store of cascade draws measures the traffic, not the draw. ``pays`` reads the AUROC
against the bench (``bench/cascade.py``): 0.81 took 44 % of the uniform's LLM calls for the same
detection delay, 0.50 none; below ``NO_SAVING_BELOW`` expect no saving.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

CELL_ORDER = ("severe", "moderate", "minor", "none")  # the cheap look's bands, worst first
PAYS_FROM = 0.75
NO_SAVING_BELOW = 0.60


@dataclass(frozen=True)
class CellAgreement:
    cell: str
    judged: int
    weight: float  # turns of traffic they stand for
    llm_severe_rate: float | None


@dataclass(frozen=True)
class Agreement:
    cells: tuple[CellAgreement, ...]
    pairs: int
    auroc: float | None  # None: no severe or no clean LLM call among the pairs
    llm_severe_share: float | None  # weighted
    cheap_severe_share: float | None  # weighted: the cheap look's own rate

    @property
    def verdict(self) -> str:
        if self.auroc is None:
            return "unknown"
        if self.auroc >= PAYS_FROM:
            return "pays"
        if self.auroc < NO_SAVING_BELOW:
            return "no saving"
        return "marginal"


def agreement(
    cells: Sequence[str], llm_severe: Sequence[bool], inclusion: Sequence[float | None]
) -> Agreement:
    """``cells``: the cheap look's band per pair; ``inclusion``: its probability (None: 1)."""
    if not len(cells) == len(llm_severe) == len(inclusion):
        raise ValueError("one cell, LLM call and probability per pair")
    weights = []
    for p in inclusion:
        if p is not None and not 0.0 < p <= 1.0:
            raise ValueError(f"an inclusion probability must be in (0, 1], got {p}")
        weights.append(1.0 if p is None else 1.0 / p)
    unknown = sorted(set(cells) - set(CELL_ORDER))
    if unknown:
        raise ValueError(f"unknown cheap-look cell(s): {', '.join(unknown)}")
    per_cell = []
    for cell in CELL_ORDER:
        idx = [i for i, c in enumerate(cells) if c == cell]
        w = sum(weights[i] for i in idx)
        rate = sum(weights[i] for i in idx if llm_severe[i]) / w if idx else None
        per_cell.append(CellAgreement(cell, len(idx), w, rate))
    total = sum(weights)
    severe_w = sum(w for w, y in zip(weights, llm_severe, strict=True) if y)
    cheap_w = sum(w for w, c in zip(weights, cells, strict=True) if c == "severe")
    return Agreement(
        tuple(per_cell),
        len(cells),
        _auroc(cells, llm_severe, weights),
        severe_w / total if total else None,
        cheap_w / total if total else None,
    )


def _auroc(cells: Sequence[str], ys: Sequence[bool], weights: Sequence[float]) -> float | None:
    rank = {c: len(CELL_ORDER) - k for k, c in enumerate(CELL_ORDER)}  # severe highest
    pos = [0.0] * (len(CELL_ORDER) + 1)
    neg = [0.0] * (len(CELL_ORDER) + 1)
    for c, y, w in zip(cells, ys, weights, strict=True):
        (pos if y else neg)[rank[c]] += w
    p_total, n_total = sum(pos), sum(neg)
    if p_total == 0 or n_total == 0:
        return None
    wins = 0.0
    below = 0.0
    for r in range(len(pos)):
        wins += pos[r] * (below + 0.5 * neg[r])
        below += neg[r]
    return wins / (p_total * n_total)
