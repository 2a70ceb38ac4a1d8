"""The jobs' recorders: rubric grading and drift series, read back from a fresh registry
(the baseline tiers' through tests/monitor/jobs/test_baseline_tiers.py)."""

from __future__ import annotations

import math

from prometheus_client import CollectorRegistry

from monitor.jobs.recorders import DriftRecorder, JobRunRecorder, RubricRecorder
from monitor.metrics.exporter import Metrics, is_declared


def test_record_rubric_grading(registry: CollectorRegistry) -> None:
    metrics = RubricRecorder(Metrics(registry))
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
    m = DriftRecorder(Metrics(registry))
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


def test_job_runs_and_last_success(registry: CollectorRegistry) -> None:
    recorder = JobRunRecorder(Metrics(registry))
    recorder.record_job_run("drift", "ok", 1.7e9)
    recorder.record_job_run("drift", "failed", 1.8e9)
    get = registry.get_sample_value
    assert get("casewatch_job_runs_total", {"job": "drift", "outcome": "ok"}) == 1
    assert get("casewatch_job_runs_total", {"job": "drift", "outcome": "failed"}) == 1
    assert get("casewatch_job_last_success_timestamp_seconds", {"job": "drift"}) == 1.7e9
