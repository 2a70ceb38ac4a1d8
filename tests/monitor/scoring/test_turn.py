import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.schema.turn import METRICS, Band
from monitor.scoring import turn as scoring

unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
score_maps = st.fixed_dictionaries({m: unit for m in METRICS})


@pytest.mark.parametrize(
    ("score", "expected"),
    [
        (0.0, Band.SEVERE),
        (0.30, Band.SEVERE),
        (0.305, Band.SEVERE),
        (0.31, Band.MODERATE),
        (0.60, Band.MODERATE),
        (0.61, Band.MINOR),
        (0.85, Band.MINOR),
        (0.86, Band.NONE),
        (1.0, Band.NONE),
    ],
)
def test_band_edges_follow_the_case_aware_papers_appendix_b(score: float, expected: Band) -> None:
    assert scoring.band(score) is expected


@pytest.mark.parametrize("bad", [-0.01, 1.01, math.nan])
def test_band_rejects_out_of_range(bad: float) -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        scoring.band(bad)


def test_builtin_profiles_sum_to_one_and_cover_all_metrics() -> None:
    for name, weights in scoring.BUILTIN_PROFILES.items():
        assert scoring.validate_weights(weights) == pytest.approx(weights), name
    rh = scoring.BUILTIN_PROFILES["retrieval-heavy"]
    assert rh["retrieval_correctness"] == pytest.approx(0.20)
    assert rh["context_sufficiency"] == pytest.approx(0.20)
    assert rh["hallucination"] == pytest.approx(0.16)
    assert scoring.BUILTIN_PROFILES["uniform"]["hallucination"] == pytest.approx(0.125)


def test_validate_weights_names_the_problem() -> None:
    with pytest.raises(ValueError, match="sum to 1"):
        scoring.validate_weights({m: 0.1 for m in METRICS})
    with pytest.raises(ValueError, match="missing"):
        scoring.validate_weights({"hallucination": 1.0})
    with pytest.raises(ValueError, match="unknown"):
        scoring.validate_weights({**scoring.DEFAULT_PROFILE, "tone": 0.0})
    with pytest.raises(ValueError, match=">= 0"):
        scoring.validate_weights(
            {**scoring.DEFAULT_PROFILE, "hallucination": -0.2, "answer_helpfulness": 0.55}
        )


def test_s_final_matches_paper_weights() -> None:
    scores = dict.fromkeys(METRICS, 1.0)
    scores["hallucination"] = 0.0
    assert scoring.s_final(scores, scoring.DEFAULT_PROFILE) == pytest.approx(0.80)


def test_one_severe_critical_failure_is_never_averaged_away() -> None:
    scores = dict.fromkeys(METRICS, 1.0)
    scores["identifier_integrity"] = 0.1
    assert scoring.band(scoring.s_final(scores, scoring.DEFAULT_PROFILE)) is Band.NONE
    assert scoring.turn_band(scores, scoring.DEFAULT_PROFILE) is Band.SEVERE
    # A non-critical severe metric does not force the turn band.
    scores = dict.fromkeys(METRICS, 1.0)
    scores["answer_type_fit"] = 0.1
    assert scoring.turn_band(scores, scoring.DEFAULT_PROFILE) is Band.NONE


@given(score_maps, st.sampled_from(sorted(scoring.BUILTIN_PROFILES)))
def test_s_final_is_bounded_by_min_and_max_score(scores: dict[str, float], profile: str) -> None:
    weights = scoring.BUILTIN_PROFILES[profile]
    s = scoring.s_final(scores, weights)
    assert 0.0 <= s <= 1.0
    assert min(scores.values()) - 1e-9 <= s <= max(scores.values()) + 1e-9


@given(score_maps, st.sampled_from(METRICS), unit)
def test_raising_a_metric_never_lowers_s_final_or_the_turn_band(
    scores: dict[str, float], metric: str, new: float
) -> None:
    better = dict(scores)
    better[metric] = max(scores[metric], new)
    w = scoring.DEFAULT_PROFILE
    assert scoring.s_final(better, w) >= scoring.s_final(scores, w) - 1e-12
    assert scoring.turn_band(better, w).rank >= scoring.turn_band(scores, w).rank


@given(score_maps)
def test_turn_band_is_never_better_than_the_s_final_band(scores: dict[str, float]) -> None:
    w = scoring.DEFAULT_PROFILE
    assert scoring.turn_band(scores, w).rank <= scoring.band(scoring.s_final(scores, w)).rank


@pytest.mark.parametrize(
    ("b", "edge"),
    [(Band.SEVERE, 0.0), (Band.MODERATE, 0.31), (Band.MINOR, 0.61), (Band.NONE, 0.86)],
)
def test_lower_edge_is_where_band_starts(b: Band, edge: float) -> None:
    """The edges other modules use (active sampling, the heuristic judge) are the bands'."""
    assert scoring.lower_edge(b) == edge
    assert scoring.band(edge) is b
    if edge > 0:
        assert scoring.band(math.nextafter(edge, 0.0)).rank < b.rank


def test_printed_ranges_are_the_papers_and_follow_the_edges() -> None:
    """What the judge prompt prints (``BAND_ANCHORS``) is built from the edges: the paper's
    two-decimal ranges, each ending 0.01 below the next band's lower edge."""
    assert [scoring.printed_range(b) for b in Band] == [
        "0.00-0.30",
        "0.31-0.60",
        "0.61-0.85",
        "0.86-1.00",
    ]
