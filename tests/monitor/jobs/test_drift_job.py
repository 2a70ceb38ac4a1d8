"""The drift job on a real store (SQLite and PostgreSQL): gauges, result rows, injected clock."""

from __future__ import annotations

import math
from datetime import timedelta

from prometheus_client import CollectorRegistry
from sqlalchemy import func, select

from monitor.config.drift import DriftConfig
from monitor.config.settings import load_settings
from monitor.jobs.build import build_jobs
from monitor.jobs.drift import DriftJob, windows
from monitor.jobs.inputs import read_job_inputs
from monitor.jobs.scheduler import JobScheduler
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.stats.drift import signal_names
from monitor.storage.drift_queries import latest_results
from monitor.storage.store import Store
from monitor.storage.tables import drift_results
from tests.fixtures.drift import NOW, seed_healthy_and_regressed, seed_window

SIGNALS = len(signal_names())


def _gauge(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def _job(store: Store, clock: ManualClock, **cfg: object) -> tuple[DriftJob, Metrics]:
    metrics = Metrics(CollectorRegistry())
    job = DriftJob(DriftConfig(**cfg), store, metrics, clock=clock, retention_days=1)  # type: ignore[arg-type]
    return job, metrics


def test_a_regressed_assistant_is_flagged_and_a_healthy_one_is_not(store: Store) -> None:
    seed_healthy_and_regressed(store, assistant="helpdesk", recent_bad=0.5)
    seed_healthy_and_regressed(store, assistant="billing", recent_bad=0.05)
    clock = ManualClock(start=NOW.timestamp())
    job, metrics = _job(store, clock)

    run = job.run_once()

    assert [a.assistant for a in run.assistants] == ["billing", "helpdesk"]
    g = "casewatch_drift_detected"
    assert _gauge(metrics, g, assistant="helpdesk", signal="score_final") == 1
    assert _gauge(metrics, g, assistant="helpdesk", signal="band_shares") == 1
    assert _gauge(metrics, g, assistant="helpdesk", signal="metric_hallucination_severe_rate") == 1
    for signal in signal_names():
        assert _gauge(metrics, g, assistant="billing", signal=signal) == 0
        assert _gauge(metrics, g, assistant="helpdesk", signal=signal) is not None
    q = _gauge(metrics, "casewatch_drift_pvalue", assistant="helpdesk", signal="score_final")
    assert q is not None and q < 0.01
    effect = _gauge(metrics, "casewatch_drift_effect", assistant="helpdesk", signal="score_final")
    assert effect is not None and effect >= 0.1
    turns = "casewatch_drift_window_turns"
    assert _gauge(metrics, turns, assistant="helpdesk", window="recent") == 80
    assert _gauge(metrics, turns, assistant="helpdesk", window="reference") == 300
    assert _gauge(metrics, "casewatch_drift_last_run_timestamp_seconds") == NOW.timestamp()

    rows = latest_results(store)
    assert len(rows) == 2 * SIGNALS
    flagged = {r["signal"] for r in rows if r["assistant"] == "helpdesk" and r["detected"]}
    assert "score_final" in flagged
    assert not any(r["detected"] for r in rows if r["assistant"] == "billing")
    assert rows[0]["run_at"] == NOW
    assert rows[0]["recent_start"] == NOW - timedelta(hours=1)


def test_too_few_recent_turns_export_nan_and_never_detect(store: Store) -> None:
    seed_healthy_and_regressed(store, assistant="helpdesk")
    clock = ManualClock(start=NOW.timestamp())
    job, metrics = _job(store, clock, min_turns=100)  # 80 recent turns < 100
    job.run_once()
    for signal in ("score_final", "band_shares", "input_product", "answer_length"):
        q = _gauge(metrics, "casewatch_drift_pvalue", assistant="helpdesk", signal=signal)
        assert q is not None and math.isnan(q)
        assert _gauge(metrics, "casewatch_drift_detected", assistant="helpdesk", signal=signal) == 0
    rows = latest_results(store, "helpdesk")
    assert {r["status"] for r in rows} == {"insufficient_data"}
    assert "fewer than min_turns=100" in rows[0]["note"]


def test_an_assistant_gone_from_both_windows_loses_its_series_and_old_rows_are_pruned(
    store: Store,
) -> None:
    seed_window(
        store,
        assistant="helpdesk",
        start=NOW - timedelta(minutes=50),
        end=NOW,
        n=40,
        bad_rate=0.1,
        seed=3,
        prefix="h",
    )
    clock = ManualClock(start=NOW.timestamp())
    job, metrics = _job(store, clock)
    job.run_once()
    labels = {"assistant": "helpdesk", "signal": "score_final"}
    assert _gauge(metrics, "casewatch_drift_detected", **labels) == 0
    assert (
        _gauge(metrics, "casewatch_drift_window_turns", assistant="helpdesk", window="recent") == 40
    )

    clock.advance(9 * 86_400)  # past the reference window, and past retention_days=1
    run = job.run_once()
    assert run.assistants == []
    assert _gauge(metrics, "casewatch_drift_detected", **labels) is None
    assert (
        _gauge(metrics, "casewatch_drift_window_turns", assistant="helpdesk", window="recent")
        is None
    )
    assert _gauge(metrics, "casewatch_drift_last_run_timestamp_seconds") == clock.time()
    with store.transaction(write=False) as conn:
        assert conn.scalar(select(func.count()).select_from(drift_results)) == 0


def test_the_scheduler_runs_the_job_under_its_lease(store: Store) -> None:
    seed_healthy_and_regressed(store)
    clock = ManualClock(start=NOW.timestamp())
    metrics = Metrics(CollectorRegistry())
    settings = load_settings(storage={"url": store.url, "retention_days": None})
    inputs = read_job_inputs(settings)
    jobs = {j.name: j for j in build_jobs(settings, store, metrics, clock, inputs=inputs)}
    assert jobs["drift"].interval_seconds == settings.drift.interval_seconds
    scheduler = JobScheduler(store, metrics, clock=clock)
    scheduler.add(jobs["drift"])
    assert scheduler.run_once("drift") == "ok"
    assert _gauge(metrics, "casewatch_job_runs_total", job="drift", outcome="ok") == 1
    assert len(latest_results(store)) == SIGNALS

    disabled = load_settings(storage={"url": store.url}, drift={"enabled": False})
    inputs = read_job_inputs(disabled)
    assert "drift" not in {
        j.name for j in build_jobs(disabled, store, metrics, clock, inputs=inputs)
    }


def test_a_pinned_reference_period_is_cut_at_the_recent_window() -> None:
    cfg = DriftConfig(
        reference_period={"start": NOW - timedelta(days=3), "end": NOW + timedelta(days=1)}  # type: ignore[arg-type]
    )
    w = windows(cfg, NOW)
    assert (w.recent_start, w.recent_end) == (NOW - timedelta(hours=1), NOW)
    assert (w.reference_start, w.reference_end) == (NOW - timedelta(days=3), w.recent_start)
    inside = DriftConfig(
        reference_period={"start": NOW - timedelta(minutes=30), "end": NOW}  # type: ignore[arg-type]
    )
    w = windows(inside, NOW)
    assert w.reference_start == w.reference_end  # empty: every signal is insufficient_data
