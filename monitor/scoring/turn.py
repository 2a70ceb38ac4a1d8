"""Case-Aware scoring: weight profiles, S_final, severity bands and the turn-band rule.

Pure functions, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from monitor.schema.turn import METRICS, Band

DEFAULT_PROFILE: dict[str, float] = {
    "hallucination": 0.20,
    "retrieval_correctness": 0.15,
    "context_sufficiency": 0.10,
    "answer_helpfulness": 0.15,
    "answer_type_fit": 0.10,
    "identifier_integrity": 0.10,
    "case_issue_identification": 0.10,
    "resolution_alignment": 0.10,
}

UNIFORM_PROFILE: dict[str, float] = {m: 1.0 / len(METRICS) for m in METRICS}


def _retrieval_heavy() -> dict[str, float]:
    # Case-Aware §5.2: retrieval correctness and context sufficiency 0.20 each, the other six
    # scaled proportionally so the profile still sums to 1.
    fixed = {"retrieval_correctness": 0.20, "context_sufficiency": 0.20}
    rest = {m: w for m, w in DEFAULT_PROFILE.items() if m not in fixed}
    scale = (1.0 - sum(fixed.values())) / sum(rest.values())
    return {m: fixed.get(m, DEFAULT_PROFILE[m] * scale) for m in METRICS}


BUILTIN_PROFILES: dict[str, dict[str, float]] = {
    "default": DEFAULT_PROFILE,
    "uniform": UNIFORM_PROFILE,
    "retrieval-heavy": _retrieval_heavy(),
}

DEFAULT_CRITICAL_METRICS: tuple[str, ...] = (
    "hallucination",
    "identifier_integrity",
    "resolution_alignment",
)

# Lower edges of the bands of the Case-Aware paper's appendix B (severe 0.00–0.30, moderate
# 0.31–0.60, minor 0.61–0.85, none 0.86–1.00), read as half-open intervals so continuous scores
# between the printed two-decimal edges (e.g. 0.305) fall in exactly one band.
_BAND_EDGES: tuple[tuple[float, Band], ...] = (
    (0.86, Band.NONE),
    (0.61, Band.MINOR),
    (0.31, Band.MODERATE),
)

# The top of each band below "none", as a Prometheus bucket bound (``le`` is inclusive): the
# largest float below the next band's lower edge, so ``le`` of the severe bucket counts
# exactly the severe scores (0.305 included), and so on. Printed as e.g. 0.30999999999999994.
BAND_BUCKET_BOUNDS: tuple[float, ...] = tuple(
    math.nextafter(edge, 0.0) for edge, _ in reversed(_BAND_EDGES)
)

WEIGHT_TOLERANCE = 1e-6


def validate_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """Return the weights as a dict over all 8 metrics, or raise ValueError saying what is wrong."""
    unknown = sorted(set(weights) - set(METRICS))
    if unknown:
        raise ValueError(f"unknown metric(s) in weight profile: {', '.join(unknown)}")
    missing = sorted(set(METRICS) - set(weights))
    if missing:
        raise ValueError(f"weight profile is missing metric(s): {', '.join(missing)}")
    for metric, w in weights.items():
        if not math.isfinite(w) or w < 0:
            raise ValueError(f"weight for {metric} must be a finite number >= 0, got {w}")
    total = math.fsum(weights.values())
    if abs(total - 1.0) > WEIGHT_TOLERANCE:
        raise ValueError(f"weights must sum to 1, they sum to {total:.6f}")
    return {m: float(weights[m]) for m in METRICS}


def lower_edge(b: Band) -> float:
    """The lowest score in band ``b`` (0.0 for severe): the one place the edges are written."""
    return next((edge for edge, named in _BAND_EDGES if named is b), 0.0)


def printed_range(b: Band) -> str:
    """Band ``b`` as the Case-Aware paper prints it, two decimals at each end ("0.31-0.60"):
    from its lower edge to 0.01 below the next band's (1.00 for none)."""
    order = list(Band)
    above = order.index(b) + 1
    top = lower_edge(order[above]) - 0.01 if above < len(order) else 1.0
    return f"{lower_edge(b):.2f}-{top:.2f}"


def band(score: float) -> Band:
    """Severity band of a score in [0, 1]."""
    if not 0.0 <= score <= 1.0 or math.isnan(score):
        raise ValueError(f"score must be in [0, 1], got {score}")
    for edge, b in _BAND_EDGES:
        if score >= edge:
            return b
    return Band.SEVERE


def worst(bands: Sequence[Band]) -> Band:
    if not bands:
        raise ValueError("worst() of no bands")
    return min(bands, key=lambda b: b.rank)


def s_final(scores: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """S_final = Σ w_i s_i over the eight metrics (the Case-Aware paper's Eq. 1)."""
    missing = [m for m in METRICS if m not in scores]
    if missing:
        raise ValueError(f"scores missing metric(s): {', '.join(missing)}")
    value = math.fsum(weights[m] * scores[m] for m in METRICS)
    # fsum of weights summing to 1 ± 1e-6 can land a hair outside [0, 1].
    return min(1.0, max(0.0, value))


def metric_bands(scores: Mapping[str, float]) -> dict[str, Band]:
    return {m: band(scores[m]) for m in METRICS}


def turn_band(
    scores: Mapping[str, float],
    weights: Mapping[str, float],
    critical: Sequence[str] = DEFAULT_CRITICAL_METRICS,
) -> Band:
    """The worse of band(S_final) and the worst critical-metric band.

    One severe failure on a critical metric is never averaged away by good scores elsewhere.
    """
    candidates = [band(s_final(scores, weights))]
    candidates.extend(band(scores[m]) for m in critical)
    return worst(candidates)
