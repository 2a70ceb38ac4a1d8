"""Confidence-aware {A, B, Tie} scoring of DICE (§3.2), pure: no I/O.

Stage 2 of a pairwise judgment is one token from {A, B, Tie}. With the endpoint's
``top_logprobs`` of that token:

- P = softmax over the three labels' logprobs (eq. 1). A label absent from the top logprobs
  gets the floor: the lowest logprob the endpoint returned (it is at most that likely).
- ΔP = P_max − P_second (eq. 2). ΔP >= 0.1 → hard score (1, 0), (0, 1) or (0.5, 0.5) (eq. 3);
  else the soft score (p_A + p_Tie·p_A/(p_A+p_B), p_B + p_Tie·p_B/(p_A+p_B)) (eq. 4).
- Without logprobs the parsed label gives the hard score, marked ``confidence = unknown``.

Each pair is judged twice, the second time with the answers swapped; ``combine_orders`` maps
the swapped score back and averages, and keeps |difference| as the position-bias figure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

Label = Literal["A", "B", "Tie"]
Kind = Literal["hard", "soft", "unknown"]
Outcome = Literal["win", "tie", "loss"]

LABELS: tuple[Label, ...] = ("A", "B", "Tie")
KINDS: tuple[Kind, ...] = ("hard", "soft", "unknown")
OUTCOMES: tuple[Outcome, ...] = ("win", "tie", "loss")
# DICE §3.2: "determined through grid search on a validation set".
DEFAULT_CONFIDENCE_THRESHOLD = 0.1
# Scores within this of 0.5 count as a tie (float noise of averaging, not a judgment).
_TIE_EPSILON = 1e-9

_LABEL_BY_TEXT: dict[str, Label] = {"a": "A", "b": "B", "tie": "Tie"}
_SWAPPED: dict[Label, Label] = {"A": "B", "B": "A", "Tie": "Tie"}
# Decoration a model may put around a bare label: spaces, quotes, Markdown emphasis, brackets,
# a final full stop. Anything else ("A or B", "Answer A") is not a label.
_DECORATION = re.compile(r"^[\s\"'`*_\[(]*(?P<label>[A-Za-z]+)[\s\"'`*_\])\.:]*$")


@dataclass(frozen=True)
class PairScore:
    """One judged order: the score of the answer shown as A and of the answer shown as B."""

    score_a: float
    score_b: float
    kind: Kind
    label: Label  # argmax of P, or the parsed label when kind == "unknown"
    probabilities: Mapping[str, float] | None = None  # {"A": p, "B": p, "Tie": p}
    delta_p: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "score_a": self.score_a,
            "score_b": self.score_b,
            "kind": self.kind,
            "label": self.label,
            "probabilities": dict(self.probabilities) if self.probabilities else None,
            "delta_p": self.delta_p,
        }


@dataclass(frozen=True)
class CombinedScore:
    """A pair judged in both orders, from the point of view of the first-named answer."""

    score_a: float
    score_b: float
    forward: PairScore
    swapped: PairScore | None
    disagreement: float  # |forward.score_a − swapped score of the same answer|; 0 unswapped

    @property
    def outcome(self) -> Outcome:
        return outcome_of(self.score_a)

    @property
    def label_flipped(self) -> bool:
        """The two orders named different winners (position bias at the decision level)."""
        if self.swapped is None:
            return False
        return self.forward.label != swap_label(self.swapped.label)

    @property
    def kinds(self) -> tuple[Kind, ...]:
        if self.swapped is None:
            return (self.forward.kind,)
        return (self.forward.kind, self.swapped.kind)


def parse_label(text: str | None) -> Label | None:
    """The label of a stage-2 reply or token: 'A', 'B' or 'Tie' (any case, lightly
    decorated), else None. Never guesses from longer text."""
    if text is None:
        return None
    match = _DECORATION.match(text)
    if match is None:
        return None
    return _LABEL_BY_TEXT.get(match.group("label").lower())


def label_logprobs(top_logprobs: Iterable[tuple[str, float]]) -> dict[Label, float] | None:
    """Each label's logprob from the decision token's top logprobs; a missing label gets the
    floor (the lowest logprob returned). None when no returned token is a label."""
    found: dict[Label, float] = {}
    floor = math.inf
    for token, logprob in top_logprobs:
        if math.isnan(logprob):
            continue
        floor = min(floor, logprob)
        label = parse_label(token)
        if label is not None:
            # " A" and "A" may both appear: they are the same decision, so the most likely one
            # stands for the label (summing would double-count when a tokenizer splits).
            found[label] = max(found.get(label, -math.inf), logprob)
    if not found:
        return None
    return {label: found.get(label, floor) for label in LABELS}


def softmax(logprobs: Mapping[Label, float]) -> dict[Label, float]:
    """Eq. 1 over the three labels (numerically stable)."""
    top = max(logprobs[label] for label in LABELS)
    weights = {label: math.exp(logprobs[label] - top) for label in LABELS}
    total = sum(weights.values())
    return {label: weights[label] / total for label in LABELS}


def score_probabilities(
    probabilities: Mapping[Label, float], threshold: float = DEFAULT_CONFIDENCE_THRESHOLD
) -> PairScore:
    """Eqs. 2-4: hard score when ΔP >= threshold, else the soft score."""
    if not all(label in probabilities for label in LABELS):
        raise ValueError(f"probabilities need all of {LABELS}, got {sorted(probabilities)}")
    if any(p < 0 or math.isnan(p) for p in probabilities.values()):
        raise ValueError("probabilities must be non-negative numbers")
    ranked = sorted(LABELS, key=lambda label: probabilities[label], reverse=True)
    best = ranked[0]
    delta = probabilities[ranked[0]] - probabilities[ranked[1]]
    p: dict[str, float] = {label: float(probabilities[label]) for label in LABELS}
    # The rounding of a float sum may put ΔP a hair under the threshold it equals.
    if delta >= threshold - 1e-12:
        a, b = hard_scores(best)
        return PairScore(a, b, "hard", best, p, delta)
    p_a, p_b, p_tie = p["A"], p["B"], p["Tie"]
    if p_a + p_b <= 0.0:
        a = b = 0.5
    else:
        a = p_a + p_tie * p_a / (p_a + p_b)
        b = p_b + p_tie * p_b / (p_a + p_b)
    return PairScore(a, b, "soft", best, p, delta)


def score_logprobs(
    top_logprobs: Iterable[tuple[str, float]], threshold: float = DEFAULT_CONFIDENCE_THRESHOLD
) -> PairScore | None:
    """The score of a decision token from its top logprobs; None if no label is among them."""
    logprobs = label_logprobs(top_logprobs)
    if logprobs is None:
        return None
    return score_probabilities(softmax(logprobs), threshold)


def hard_scores(label: Label) -> tuple[float, float]:
    """Eq. 3."""
    return {"A": (1.0, 0.0), "B": (0.0, 1.0), "Tie": (0.5, 0.5)}[label]


def score_label(label: Label) -> PairScore:
    """A decision without logprobs: hard score from the label, confidence unknown."""
    a, b = hard_scores(label)
    return PairScore(a, b, "unknown", label)


def swap_label(label: Label) -> Label:
    return _SWAPPED[label]


def combine_orders(forward: PairScore, swapped: PairScore | None) -> CombinedScore:
    """Average the forward order with the swapped one (where the first-named answer was shown
    as B), from the first-named answer's point of view."""
    if swapped is None:
        return CombinedScore(forward.score_a, forward.score_b, forward, None, 0.0)
    a = (forward.score_a + swapped.score_b) / 2.0
    b = (forward.score_b + swapped.score_a) / 2.0
    return CombinedScore(a, b, forward, swapped, abs(forward.score_a - swapped.score_b))


def outcome_of(score: float) -> Outcome:
    """win / tie / loss of an answer from its (averaged) pairwise score."""
    if abs(score - 0.5) <= _TIE_EPSILON:
        return "tie"
    return "win" if score > 0.5 else "loss"


def position_disagreement(pairs: Sequence[CombinedScore]) -> float | None:
    """Mean |score(A first) − score(A second)| over the pairs judged in both orders: 0 means
    the order never mattered, 1 that it always decided everything. None without such pairs."""
    swapped = [p.disagreement for p in pairs if p.swapped is not None]
    if not swapped:
        return None
    return sum(swapped) / len(swapped)


def label_flip_rate(pairs: Sequence[CombinedScore]) -> float | None:
    """Share of pairs judged in both orders whose winner changed with the order."""
    swapped = [p for p in pairs if p.swapped is not None]
    if not swapped:
        return None
    return sum(1 for p in swapped if p.label_flipped) / len(swapped)


__all__ = [
    "DEFAULT_CONFIDENCE_THRESHOLD",
    "KINDS",
    "LABELS",
    "OUTCOMES",
    "CombinedScore",
    "Kind",
    "Label",
    "Outcome",
    "PairScore",
    "combine_orders",
    "hard_scores",
    "label_flip_rate",
    "label_logprobs",
    "outcome_of",
    "parse_label",
    "position_disagreement",
    "score_label",
    "score_logprobs",
    "score_probabilities",
    "softmax",
    "swap_label",
]
