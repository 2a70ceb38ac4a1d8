"""Judging's recorder: verdict, judge-request and panel series, read back from a fresh
registry."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from monitor.judging.arbitration import PanelOutcome
from monitor.judging.recorder import JudgingRecorder
from monitor.judging.verdicts import failed_verdict, single_judge_verdict
from monitor.metrics.exporter import Metrics
from monitor.schema.turn import (
    METRICS,
    Assistant,
    Case,
    JudgeScores,
    Judgment,
    MetricScore,
    TurnEvent,
)
from monitor.scoring.turn import BAND_BUCKET_BOUNDS, DEFAULT_CRITICAL_METRICS, DEFAULT_PROFILE


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


def test_record_verdict_scored(registry: CollectorRegistry) -> None:
    metrics = JudgingRecorder(Metrics(registry))
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
    severe_bucket = {"assistant": "helpdesk", "le": str(BAND_BUCKET_BOUNDS[0])}
    assert get("casewatch_score_final_bucket", severe_bucket) == 1
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
    metrics = JudgingRecorder(Metrics(registry))
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
    metrics = JudgingRecorder(Metrics(registry))
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
    metrics = JudgingRecorder(Metrics(registry))
    bad = _judgment(0.5, status="judge_failed", scores=None, failure_reason="free text " * 5)
    metrics.record_verdict(failed_verdict(_turn(), [bad], "x", weight_profile="default"))
    labels = {"judge": "primary", "reason": "internal"}
    assert registry.get_sample_value("casewatch_judge_failed_total", labels) == 1


def test_exposition_has_no_id_labels(registry: CollectorRegistry) -> None:
    metrics = JudgingRecorder(Metrics(registry))
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


def test_record_panel_counts_agreement_arbiter_and_cost_by_role(
    registry: CollectorRegistry,
) -> None:
    m = JudgingRecorder(Metrics(registry))
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


def test_a_judge_request_without_latency_observes_none(registry: CollectorRegistry) -> None:
    """The baseline-tier job's pairwise requests: outcome, bounded reason and cost only."""
    recorder = JudgingRecorder(Metrics(registry))
    recorder.record_judge_request("pairwise", ok=False, failure_reason="no such reason")
    recorder.record_judge_request("pairwise", ok=True, cost_usd=0.5)
    get = registry.get_sample_value
    assert get("casewatch_judge_failed_total", {"judge": "pairwise", "reason": "internal"}) == 1
    assert get("casewatch_judge_requests_total", {"judge": "pairwise", "outcome": "ok"}) == 1
    assert get("casewatch_judge_cost_usd_total", {"judge": "pairwise"}) == 0.5
    assert get("casewatch_judge_latency_seconds_count", {"judge": "pairwise"}) is None


def test_weighted_severe_share_counts_each_turn_by_its_weight(registry: CollectorRegistry) -> None:
    """casewatch_turns_judged_weight_total adds 1/π per judged turn (the default 1 makes it
    casewatch_turns_judged_total itself, which uniform deployments rely on)."""
    metrics = JudgingRecorder(Metrics(registry))
    kw = {
        "weights": DEFAULT_PROFILE,
        "weight_profile": "default",
        "critical": DEFAULT_CRITICAL_METRICS,
    }
    severe = single_judge_verdict(_turn(), _judgment(0.2), **kw)  # type: ignore[arg-type]
    clean = single_judge_verdict(_turn(), _judgment(0.95), **kw)  # type: ignore[arg-type]
    failed = _judgment(0.5, status="judge_failed", scores=None, failure_reason="timeout")
    metrics.record_verdict(severe)
    metrics.record_verdict(clean)
    metrics.record_verdict(clean, 4.0)
    metrics.record_verdict(
        failed_verdict(_turn(), [failed], "timeout", weight_profile="default"), 2.0
    )
    get = registry.get_sample_value

    def weight(band: str) -> float | None:
        return get("casewatch_turns_judged_weight_total", {"assistant": "helpdesk", "band": band})

    assert [weight(b) for b in ("severe", "none", "judge_failed", "moderate", "minor")] == [
        1.0,
        5.0,
        2.0,
        0.0,
        0.0,
    ]
    assert get("casewatch_turns_judged_total", {"assistant": "helpdesk", "band": "none"}) == 2


def test_weighted_metric_bands_add_each_turns_weight_to_every_metric(
    registry: CollectorRegistry,
) -> None:
    """casewatch_metric_band_weight_total adds 1/π to the turn's band of every metric, beside
    the unweighted count; a judge_failed turn has no metric band, so adds to neither; every
    metric's bands of a new assistant start at 0 in both."""
    metrics = JudgingRecorder(Metrics(registry))
    kw = {
        "weights": DEFAULT_PROFILE,
        "weight_profile": "default",
        "critical": DEFAULT_CRITICAL_METRICS,
    }
    severe = single_judge_verdict(_turn(), _judgment(0.2), **kw)  # type: ignore[arg-type]
    clean = single_judge_verdict(_turn(), _judgment(0.95), **kw)  # type: ignore[arg-type]
    failed = _judgment(0.5, status="judge_failed", scores=None, failure_reason="timeout")
    metrics.record_verdict(severe, 2.0)  # drawn at 0.5
    metrics.record_verdict(clean, 20.0)  # drawn at 0.05
    metrics.record_verdict(clean)  # a rule's turn, or uniform
    metrics.record_verdict(
        failed_verdict(_turn(), [failed], "timeout", weight_profile="default"), 4.0
    )
    get = registry.get_sample_value
    for metric in METRICS:

        def read(family: str, band: str, metric: str = metric) -> float | None:
            return get(family, {"assistant": "helpdesk", "metric": metric, "band": band})

        bands = ("severe", "moderate", "minor", "none")
        assert [read("casewatch_metric_band_weight_total", b) for b in bands] == [2, 0, 0, 21]
        assert [read("casewatch_metric_band_total", b) for b in bands] == [1, 0, 0, 2]
        assert read("casewatch_metric_band_weight_total", "judge_failed") is None
        # Hajek's ratio of the weights: the traffic's severe share, 2/23, not what was
        # judged's 1/3.
        weights = [read("casewatch_metric_band_weight_total", b) or 0.0 for b in bands]
        assert weights[0] / sum(weights) == pytest.approx(2 / 23)
    # The turn band's weight moved by the same amounts.
    turn = {"assistant": "helpdesk", "band": "none"}
    assert get("casewatch_turns_judged_weight_total", turn) == 21


def test_a_new_assistants_metric_bands_exist_at_zero(registry: CollectorRegistry) -> None:
    """So rate() in rules/ counts an assistant's first severe turn of a metric, which under the
    cascade may weigh 1/π of a hundred."""
    metrics = JudgingRecorder(Metrics(registry))
    metrics.record_verdict(
        single_judge_verdict(
            _turn("fresh"),
            _judgment(0.95),
            weights=DEFAULT_PROFILE,
            weight_profile="default",
            critical=DEFAULT_CRITICAL_METRICS,
        )
    )
    get = registry.get_sample_value
    for family in ("casewatch_metric_band_total", "casewatch_metric_band_weight_total"):
        for metric in METRICS:
            labels = {"assistant": "fresh", "metric": metric, "band": "severe"}
            assert get(family, labels) == 0, (family, metric)
