"""Drift on case signals (SQLite and PostgreSQL): the drift job tests an assistant's recent case
verdicts against its reference window's, with the turn signals' gauges and rows; an assistant
whose cases turn bad is flagged, a stable one is not; too few cases say insufficient_data."""

from __future__ import annotations

from datetime import timedelta

from prometheus_client import CollectorRegistry

from monitor.config.drift import DriftConfig
from monitor.jobs.drift import DriftJob
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.stats.case_drift import CASE_DRIFT_SIGNALS, CaseWindowSamples, analyze_cases
from monitor.stats.drift import signal_names
from monitor.storage.drift_queries import latest_results
from monitor.storage.store import Store
from tests.fixtures.drift import NOW, seed_healthy_and_regressed
from tests.support.case_verdicts import CaseFeed


def _gauge(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_cases_that_turn_bad_drift_and_stable_ones_do_not(store: Store) -> None:
    clock = ManualClock(start=NOW.timestamp())
    for name in ("helpdesk", "billing", "no-cases"):
        seed_healthy_and_regressed(store, assistant=name, recent_bad=0.05)
    feed = CaseFeed(store, clock)
    for name in ("helpdesk", "billing"):
        feed.cases(name, 200, 0.05, at=NOW - timedelta(days=2))
    feed.cases("helpdesk", 60, 0.5, at=NOW - timedelta(minutes=30))
    feed.cases("billing", 60, 0.05, at=NOW - timedelta(minutes=30))
    metrics = Metrics(CollectorRegistry())
    run = DriftJob(DriftConfig(), store, metrics, clock=clock, retention_days=1).run_once()

    by = {a.assistant: a for a in run.assistants}
    assert "case_unresolved_rate" in by["helpdesk"].detected
    assert "case_band_shares" in by["helpdesk"].detected
    assert not by["billing"].detected
    g = "casewatch_drift_detected"
    assert _gauge(metrics, g, assistant="helpdesk", signal="case_unresolved_rate") == 1
    assert (
        _gauge(metrics, g, assistant="helpdesk", signal="case_metric_resolution_severe_rate") == 1
    )
    for signal in CASE_DRIFT_SIGNALS:
        assert _gauge(metrics, g, assistant="billing", signal=signal) == 0
    rows = latest_results(store)
    helpdesk = {r["signal"]: r for r in rows if r["assistant"] == "helpdesk"}
    assert set(helpdesk) == {*signal_names(), *CASE_DRIFT_SIGNALS}
    assert (helpdesk["case_score"]["recent_n"], helpdesk["case_score"]["reference_n"]) == (60, 200)
    # An assistant without case verdicts gets the turn signals only.
    assert {r["signal"] for r in rows if r["assistant"] == "no-cases"} == set(signal_names())


def test_too_few_cases_are_insufficient_data_never_no_drift() -> None:
    recent, reference = CaseWindowSamples(), CaseWindowSamples()
    bands = {"resolution": "severe"}
    for _ in range(5):
        recent.add(0.1, "severe", "unresolved", bands)
    for _ in range(100):
        reference.add(0.9, "none", "resolved", {"resolution": "none"})
    results = analyze_cases(recent, reference, DriftConfig())
    assert [r.signal for r in results] == list(CASE_DRIFT_SIGNALS)
    assert {r.status for r in results} == {"insufficient_data"}
    assert not any(r.detected for r in results)
