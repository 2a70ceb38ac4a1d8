"""The case score and the case band rule (monitor/scoring/case.py): the Case-Aware paper's
bands and weighted sum over the case metrics, the critical case metrics, and the outcome caps."""

from __future__ import annotations

import pytest

from monitor.schema.case import CASE_METRICS
from monitor.schema.turn import Band
from monitor.scoring import case as case_scoring


def _scores(value: float = 0.95, **overrides: float) -> dict[str, float]:
    return {m: overrides.get(m, value) for m in CASE_METRICS}


def test_the_weights_sum_to_one_over_the_case_metrics() -> None:
    assert set(case_scoring.CASE_WEIGHTS) == set(CASE_METRICS)
    assert sum(case_scoring.CASE_WEIGHTS.values()) == pytest.approx(1.0)
    assert case_scoring.case_score(_scores(0.5)) == pytest.approx(0.5)


def test_a_clean_resolved_case_is_in_the_none_band() -> None:
    assert case_scoring.case_band(_scores(0.95), "resolved") is Band.NONE
    assert case_scoring.case_band(_scores(0.95), "handed_off") is Band.NONE


def test_an_unresolved_case_is_at_best_moderate_and_a_partial_one_at_best_minor() -> None:
    assert case_scoring.case_band(_scores(0.95), "unresolved") is Band.MODERATE
    assert case_scoring.case_band(_scores(0.95), "partial") is Band.MINOR


def test_a_severe_critical_metric_is_never_averaged_away() -> None:
    good_elsewhere = _scores(0.99, consistency=0.1)  # an identifier changed between turns
    assert case_scoring.case_score(good_elsewhere) > 0.85
    assert case_scoring.case_band(good_elsewhere, "resolved") is Band.SEVERE
    # A non-critical metric is weighed in, not taken as the band.
    effort = _scores(0.99, customer_effort=0.1)
    assert case_scoring.case_band(effort, "resolved") is Band.MINOR


def test_judges_are_combined_by_median_and_their_outcome_by_majority() -> None:
    combined = case_scoring.combine([_scores(0.2), _scores(0.9), _scores(0.8)])
    assert combined == _scores(0.8)
    assert case_scoring.combine([_scores(0.2), _scores(0.8)]) == _scores(0.5)
    assert case_scoring.outcome_of(["resolved", "partial", "resolved"]) == "resolved"
    assert case_scoring.outcome_of(["resolved", "partial"]) == "partial"  # ties: the worse


def test_judges_disagree_on_another_band_or_another_outcome() -> None:
    assert not case_scoring.bands_differ(_scores(0.9), "resolved", _scores(0.95), "resolved")
    assert case_scoring.bands_differ(_scores(0.9), "resolved", _scores(0.9), "partial")
    assert case_scoring.bands_differ(_scores(0.9), "resolved", _scores(0.5), "resolved")


def test_missing_metrics_and_the_paper_aggregate() -> None:
    with pytest.raises(ValueError, match="missing metric"):
        case_scoring.case_score({"resolution": 1.0})
    assert case_scoring.turn_mean([0.5, None, 1.0]) == pytest.approx(0.75)
    assert case_scoring.turn_mean([None]) is None
