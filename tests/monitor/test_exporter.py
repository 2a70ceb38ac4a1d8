"""Metric declarations and recording helpers, read back from a fresh registry."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from monitor import __version__
from monitor.exporter import (
    METRIC_NAMES,
    OTHER,
    SCORE_BUCKETS,
    LabelGuard,
    Metrics,
    is_declared,
)
from monitor.judging.verdicts import failed_verdict, single_judge_verdict
from monitor.models import (
    METRICS,
    Assistant,
    Band,
    Case,
    JudgeScores,
    Judgment,
    MetricScore,
    TurnEvent,
)
from monitor.scoring import BAND_BUCKET_BOUNDS, DEFAULT_CRITICAL_METRICS, DEFAULT_PROFILE, band


def _turn(assistant: str = "helpdesk") -> TurnEvent:
    return TurnEvent(
        event_id="e1",
        conversation_id="c1",
        turn_index=0,
        timestamp=datetime(2026, 1, 1, tzinfo=UTC),
        assistant=Assistant(name=assistant, version="1", model="m"),
        case=Case(subject="s", description="d"),
        query="q",
        answer="a",
    )


def _judgment(score: float, **kw: object) -> Judgment:
    scores = JudgeScores(**{m: MetricScore(score=score, justification="j") for m in METRICS})
    base: dict[str, object] = {
        "judge": "primary",
        "kind": "openai",
        "model": "m",
        "status": "ok",
        "scores": scores,
        "attempts": 2,
        "input_tokens": 100,
        "output_tokens": 20,
        "cost_usd": 0.25,
        "latency_seconds": 1.5,
    }
    base.update(kw)
    return Judgment.model_validate(base)


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


def test_every_declared_name_is_exported(registry: CollectorRegistry) -> None:
    Metrics(registry)
    families = {m.name for m in registry.collect()}
    exported = {
        name
        for m in registry.collect()
        for name in ([f"{m.name}_total"] if m.type == "counter" else [m.name])
    }
    assert set(METRIC_NAMES) == exported
    assert all(n.startswith("casewatch_") for n in families)


def test_is_declared_accepts_histogram_series_only_for_histograms() -> None:
    assert is_declared("casewatch_score_final_bucket")
    assert is_declared("casewatch_judge_latency_seconds_count")
    assert is_declared("casewatch_turns_judged_total")
    assert not is_declared("casewatch_turns_judged_total_bucket")
    assert not is_declared("casewatch_nope_total")


@pytest.mark.parametrize(
    "score", [0.0, 0.3, 0.305, 0.30999, 0.31, 0.6, 0.605, 0.61, 0.85, 0.855, 0.86, 1.0]
)
def test_score_buckets_agree_with_the_band_edges(score: float) -> None:
    # Issue 21: 0.305 is severe but landed above the 0.3 bucket. Each band bound is a bucket,
    # and a score is at or below a band's bound exactly when its band is that one or worse.
    severe, moderate, minor = BAND_BUCKET_BOUNDS
    assert set(BAND_BUCKET_BOUNDS) | {1.0} <= set(SCORE_BUCKETS)
    for bound, worst_band in (
        (severe, Band.SEVERE),
        (moderate, Band.MODERATE),
        (minor, Band.MINOR),
    ):
        assert (score <= bound) == (band(score).rank <= worst_band.rank), (score, bound)


def test_a_severe_score_between_the_printed_edges_counts_in_the_severe_bucket() -> None:
    registry = CollectorRegistry()
    histogram = Histogram("s", "score", buckets=SCORE_BUCKETS, registry=registry)
    histogram.observe(0.305)
    severe = BAND_BUCKET_BOUNDS[0]
    assert registry.get_sample_value("s_bucket", {"le": str(severe)}) == 1.0


def test_build_info(registry: CollectorRegistry) -> None:
    Metrics(registry)
    assert registry.get_sample_value("casewatch_build_info", {"version": __version__}) == 1.0


def test_record_verdict_scored(registry: CollectorRegistry) -> None:
    metrics = Metrics(registry)
    verdict = single_judge_verdict(
        _turn(),
        _judgment(0.2),
        weights=DEFAULT_PROFILE,
        weight_profile="default",
        critical=DEFAULT_CRITICAL_METRICS,
    )
    metrics.record_verdict(verdict)
    get = registry.get_sample_value
    assert get("casewatch_turns_judged_total", {"assistant": "helpdesk", "band": "severe"}) == 1
    labels = {"assistant": "helpdesk", "metric": "hallucination", "band": "severe"}
    assert get("casewatch_metric_band_total", labels) == 1
    assert get("casewatch_score_final_count", {"assistant": "helpdesk"}) == 1
    assert (
        get(
            "casewatch_score_final_bucket",
            {"assistant": "helpdesk", "le": str(BAND_BUCKET_BOUNDS[0])},
        )
        == 1
    )
    assert get("casewatch_score_final_bucket", {"assistant": "helpdesk", "le": "0.1"}) == 0
    assert (
        get("casewatch_metric_score_count", {"assistant": "helpdesk", "metric": "answer_type_fit"})
        == 1
    )
    assert get("casewatch_judge_requests_total", {"judge": "primary", "outcome": "ok"}) == 1
    assert get("casewatch_judge_retries_total", {"judge": "primary"}) == 1
    assert get("casewatch_judge_tokens_total", {"judge": "primary", "kind": "input"}) == 100
    assert get("casewatch_judge_tokens_total", {"judge": "primary", "kind": "output"}) == 20
    assert get("casewatch_judge_cost_usd_total", {"judge": "primary"}) == 0.25
    assert get("casewatch_judge_latency_seconds_sum", {"judge": "primary"}) == 1.5


def test_a_new_assistant_starts_every_band_at_zero(registry: CollectorRegistry) -> None:
    """rules/ compute band shares with rate(): a band series must exist before its first
    increment, or Prometheus never sees that increment."""
    metrics = Metrics(registry)
    verdict = single_judge_verdict(
        _turn("fresh"),
        _judgment(0.95),
        weights=DEFAULT_PROFILE,
        weight_profile="default",
        critical=DEFAULT_CRITICAL_METRICS,
    )
    metrics.record_verdict(verdict)
    metrics.record_verdict(verdict)
    get = registry.get_sample_value
    bands = {
        b: get("casewatch_turns_judged_total", {"assistant": "fresh", "band": b})
        for b in ("severe", "moderate", "minor", "none", "judge_failed")
    }
    assert bands == {"severe": 0, "moderate": 0, "minor": 0, "none": 2, "judge_failed": 0}


def test_record_verdict_failed(registry: CollectorRegistry) -> None:
    metrics = Metrics(registry)
    failed = _judgment(
        0.5, status="judge_failed", scores=None, failure_reason="timeout", attempts=1
    )
    metrics.record_verdict(failed_verdict(_turn(), [failed], "timeout", weight_profile="default"))
    get = registry.get_sample_value
    assert (
        get("casewatch_turns_judged_total", {"assistant": "helpdesk", "band": "judge_failed"}) == 1
    )
    assert get("casewatch_judge_failed_total", {"judge": "primary", "reason": "timeout"}) == 1
    assert get("casewatch_judge_requests_total", {"judge": "primary", "outcome": "failed"}) == 1
    assert get("casewatch_score_final_count", {"assistant": "helpdesk"}) is None
    assert get("casewatch_judge_retries_total", {"judge": "primary"}) is None


def test_unknown_failure_reason_is_bounded(registry: CollectorRegistry) -> None:
    metrics = Metrics(registry)
    bad = _judgment(0.5, status="judge_failed", scores=None, failure_reason="free text " * 5)
    metrics.record_verdict(failed_verdict(_turn(), [bad], "x", weight_profile="default"))
    labels = {"judge": "primary", "reason": "internal"}
    assert registry.get_sample_value("casewatch_judge_failed_total", labels) == 1


class _Decision:
    def __init__(self, sampled: bool, reason: str) -> None:
        self.sampled = sampled
        self.reason = reason


def test_sampling_consumed_dead_letter_stored_commit(registry: CollectorRegistry) -> None:
    metrics = Metrics(registry)
    metrics.record_consumed("turns", 3)
    metrics.record_sampling("helpdesk", _Decision(True, "rate"))
    metrics.record_sampling("helpdesk", _Decision(False, "budget"))
    metrics.record_dead_letter("invalid_json")
    metrics.record_stored(inserted=2, duplicate=1)
    metrics.record_commit(["turns"])
    get = registry.get_sample_value
    assert get("casewatch_turns_consumed_total", {"topic": "turns"}) == 3
    assert get("casewatch_turns_sampled_total", {"assistant": "helpdesk", "reason": "rate"}) == 1
    assert get("casewatch_turns_skipped_total", {"assistant": "helpdesk", "reason": "budget"}) == 1
    assert get("casewatch_dead_letter_total", {"reason": "invalid_json"}) == 1
    assert get("casewatch_stored_total", {"outcome": "inserted"}) == 2
    assert get("casewatch_stored_total", {"outcome": "duplicate"}) == 1
    assert get("casewatch_offsets_committed_total", {"topic": "turns"}) == 1


def test_lag_series_are_replaced(registry: CollectorRegistry) -> None:
    metrics = Metrics(registry)
    metrics.set_lag({("turns", 0): 5, ("turns", 1): 7}.items())
    metrics.set_lag({("turns", 1): 2}.items())
    get = registry.get_sample_value
    assert get("casewatch_consumer_lag", {"topic": "turns", "partition": "0"}) is None
    assert get("casewatch_consumer_lag", {"topic": "turns", "partition": "1"}) == 2


def test_assistant_label_cardinality_is_capped(registry: CollectorRegistry) -> None:
    metrics = Metrics(registry, max_assistants=2)
    for name in ["a", "b", "c", "d", "a"]:
        metrics.record_sampling(name, _Decision(True, "rate"))
    get = registry.get_sample_value
    assert get("casewatch_turns_sampled_total", {"assistant": "a", "reason": "rate"}) == 2
    assert get("casewatch_turns_sampled_total", {"assistant": OTHER, "reason": "rate"}) == 2
    assert get("casewatch_turns_sampled_total", {"assistant": "c", "reason": "rate"}) is None


def test_label_guard_truncates_and_validates() -> None:
    guard = LabelGuard(3)
    assert guard("x" * 500) == "x" * 64
    assert guard("") == "unknown"
    with pytest.raises(ValueError, match="max_values"):
        LabelGuard(0)


def test_two_instances_need_two_registries(registry: CollectorRegistry) -> None:
    Metrics(registry)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        Metrics(registry)
    Metrics(CollectorRegistry())


def test_exposition_has_no_id_labels(registry: CollectorRegistry) -> None:
    metrics = Metrics(registry)
    verdict = single_judge_verdict(
        _turn(),
        _judgment(0.9),
        weights=DEFAULT_PROFILE,
        weight_profile="default",
        critical=DEFAULT_CRITICAL_METRICS,
    )
    metrics.record_verdict(verdict)
    text = generate_latest(registry).decode()
    assert "e1" not in text.replace("le=", "")
    assert "conversation" not in text
    assert "event_id" not in text


def test_prime_exports_zero_series_for_known_labels(registry: CollectorRegistry) -> None:
    metrics = Metrics(registry)
    get = registry.get_sample_value
    assert get("casewatch_stored_total", {"outcome": "duplicate"}) == 0
    assert get("casewatch_turns_consumed_total", {"topic": "turns"}) is None
    metrics.prime(topics=["turns"], dead_letter_reasons=["schema"])
    assert get("casewatch_turns_consumed_total", {"topic": "turns"}) == 0
    assert get("casewatch_offsets_committed_total", {"topic": "turns"}) == 0
    assert get("casewatch_dead_letter_total", {"reason": "schema"}) == 0


def test_record_panel_counts_agreement_arbiter_and_cost_by_role(
    registry: CollectorRegistry,
) -> None:
    from monitor.judging.arbitration import PanelOutcome

    m = Metrics(registry)
    m.record_panel(PanelOutcome("helpdesk", "ok", False, (), False, None, None, {"primary": 0.2}))
    m.record_panel(
        PanelOutcome(
            "helpdesk",
            "ok",
            True,
            ("hallucination",),
            True,
            "band:hallucination",
            "primary_b",
            {"primary": 0.2, "arbiter": 0.1},
        )
    )
    m.record_panel(
        PanelOutcome("helpdesk", "ok", True, (), True, "primary_failed", None, {"arbiter": 0.1})
    )

    def v(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert v("casewatch_panel_turns_total", assistant="helpdesk", agreement="agreed") == 1
    assert v("casewatch_panel_turns_total", assistant="helpdesk", agreement="disagreed") == 1
    assert v("casewatch_panel_turns_total", assistant="helpdesk", agreement="primary_failed") == 1
    assert v("casewatch_disagreements_total", assistant="helpdesk", metric="hallucination") == 1
    assert v("casewatch_arbiter_calls_total", assistant="helpdesk") == 2
    assert (
        v("casewatch_arbitration_outcome_total", assistant="helpdesk", sided_with="primary_b") == 1
    )
    assert v("casewatch_judge_cost_usd_by_role_total", role="primary") == pytest.approx(0.4)
    assert v("casewatch_judge_cost_usd_by_role_total", role="arbiter") == pytest.approx(0.2)


def test_record_rubric_grading(registry: CollectorRegistry) -> None:
    metrics = Metrics(registry)
    metrics.record_rubric_grading("helpdesk", "ok", 0.5, {"json": 3, "unparseable": 1, "number": 0})
    metrics.record_rubric_grading("helpdesk", "ok", 0.0)
    metrics.record_rubric_grading("helpdesk", "failed", None)
    labels = {"assistant": "helpdesk"}
    assert registry.get_sample_value("casewatch_rubric_coverage_count", labels) == 2.0
    assert registry.get_sample_value("casewatch_rubric_coverage_sum", labels) == 0.5
    assert (
        registry.get_sample_value("casewatch_rubric_coverage_bucket", {**labels, "le": "0.0"})
        == 1.0
    )
    assert (
        registry.get_sample_value("casewatch_rubric_graded_total", {**labels, "outcome": "failed"})
        == 1.0
    )
    assert is_declared("casewatch_rubric_coverage_bucket")
    assert registry.get_sample_value("casewatch_rubric_replies_total", {"path": "unparseable"}) == 1
    assert registry.get_sample_value("casewatch_rubric_replies_total", {"path": "number"}) is None


def test_drift_series_nan_for_insufficient_data_and_forgotten_assistants(
    registry: CollectorRegistry,
) -> None:
    m = Metrics(registry)
    m.record_drift_signal("helpdesk", "score_final", q_value=0.001, effect=0.4, detected=True)
    m.record_drift_signal("helpdesk", "band_shares", q_value=None, effect=None, detected=False)
    m.record_drift_windows("helpdesk", recent=12, reference=340)
    m.record_drift_run(1_700_000_000.0)
    labels = {"assistant": "helpdesk", "signal": "score_final"}
    assert registry.get_sample_value("casewatch_drift_pvalue", labels) == 0.001
    assert registry.get_sample_value("casewatch_drift_effect", labels) == 0.4
    assert registry.get_sample_value("casewatch_drift_detected", labels) == 1
    short = {"assistant": "helpdesk", "signal": "band_shares"}
    assert math.isnan(registry.get_sample_value("casewatch_drift_pvalue", short) or 0.0)
    assert registry.get_sample_value("casewatch_drift_detected", short) == 0
    window = {"assistant": "helpdesk", "window": "reference"}
    assert registry.get_sample_value("casewatch_drift_window_turns", window) == 340
    assert registry.get_sample_value("casewatch_drift_last_run_timestamp_seconds") == 1.7e9

    m.forget_drift("helpdesk")
    for name in ("casewatch_drift_pvalue", "casewatch_drift_effect", "casewatch_drift_detected"):
        assert registry.get_sample_value(name, labels) is None
        assert registry.get_sample_value(name, short) is None
    assert registry.get_sample_value("casewatch_drift_window_turns", window) is None
    m.forget_drift("never-seen")  # no series: nothing to do, no error
