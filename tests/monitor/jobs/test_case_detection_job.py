"""The case detection job on a real store (SQLite and PostgreSQL): detectors on the case
signals arm from the reference window's case verdicts, a canary whose cases turn bad pages on
the detection machinery's gauges while a stable assistant stays quiet, each case verdict is
observed once through restarts and a racing save, and the turn detection job leaves the case
detectors alone."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from monitor.config.settings import Settings
from monitor.errors import LeaseLost
from monitor.jobs.build import build_jobs
from monitor.jobs.case_detection import CaseDetectionJob
from monitor.jobs.detection import DetectionJob
from monitor.jobs.inputs import read_job_inputs
from monitor.jobs.recorders import DetectionRecorder
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.scoring.turn import DEFAULT_CRITICAL_METRICS
from monitor.stats.detection_signals import CASE_SEVERE, CASE_UNRESOLVED, Signal
from monitor.stats.detector_state import DetectorState
from monitor.storage import case_detection_queries as q
from monitor.storage import detector_saves
from monitor.storage.detection_queries import read_states
from monitor.storage.leases import Leases
from monitor.storage.store import Store
from tests.fixtures.detection import config
from tests.support.case_verdicts import CaseFeed

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start=NOW.timestamp())


@pytest.fixture
def clocked(db_url: str, clock: ManualClock) -> Iterator[Store]:
    s = Store(db_url, clock=clock)
    s.migrate()
    yield s
    s.close()


def _gauge(m: Metrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def _states(store: Store) -> dict[tuple[str, str], DetectorState]:
    return {
        (str(r["assistant"]), str(r["signal"])): DetectorState.from_row(r)
        for r in read_states(store)
    }


def test_signal_names_round_trip() -> None:
    for name in (CASE_SEVERE, CASE_UNRESOLVED):
        assert Signal.from_name(name).name == name
        assert Signal.from_name(name).case == name
    assert Signal.from_name("hallucination_severe") == Signal("hallucination")
    with pytest.raises(ValueError, match="case_unresolved"):
        Signal.from_name("case_whatever")


def test_a_case_regression_pages_once_and_the_stable_assistant_stays_quiet(
    clocked: Store, clock: ManualClock
) -> None:
    feed = CaseFeed(clocked, clock)
    for name in ("canary", "stable"):
        feed.cases(name, 1000, 0.05, at=NOW - timedelta(days=2))
    metrics = Metrics(CollectorRegistry())
    job = CaseDetectionJob(config(), clocked, DetectionRecorder(metrics), clock=clock)
    job.run_once()  # the first run: history, arms from the reference window
    for signal in (CASE_SEVERE, CASE_UNRESOLVED):
        assert _gauge(metrics, "casewatch_detector_armed", assistant="canary", signal=signal) == 1
        base = _gauge(
            metrics, "casewatch_detector_baseline_rate", assistant="canary", signal=signal
        )
        assert base is not None and 0.03 < base < 0.07
    for minute in range(40):
        clock.advance(15)
        feed.cases("stable", 10, 0.05)
        feed.cases("canary", 10, 0.40 if minute >= 10 else 0.05)
        job.run_once()
    for signal in (CASE_SEVERE, CASE_UNRESOLVED):
        assert _gauge(metrics, "casewatch_detector_alarm", assistant="canary", signal=signal) == 1
        assert _gauge(metrics, "casewatch_detector_alarm", assistant="stable", signal=signal) == 0
    assert job.alarms_raised == 2  # once per signal: the alarm is latched
    assert _gauge(metrics, "casewatch_detector_last_run_timestamp_seconds") == clock.time()
    states = _states(clocked)
    assert states[("canary", CASE_SEVERE)].observations == 400
    # The turn detection job runs beside it and leaves the case detectors' rows alone.
    turns = DetectionJob(config(), list(DEFAULT_CRITICAL_METRICS), clocked, None, clock=clock)
    turns.run_once()
    turns.run_once()
    after = _states(clocked)
    assert after[("canary", CASE_SEVERE)].detector.latched is not None
    assert after[("canary", CASE_SEVERE)].observations == 400


def test_each_case_verdict_is_observed_once_through_restarts_and_races(
    clocked: Store, clock: ManualClock
) -> None:
    feed = CaseFeed(clocked, clock)
    feed.cases("helpdesk", 30, 0.1, at=NOW - timedelta(days=2))
    CaseDetectionJob(config(), clocked, None, clock=clock).run_once()  # history
    assert q.read_new(clocked) == []  # the history is marked, not fed
    clock.advance(15)
    ids = feed.cases("helpdesk", 25, 0.2)
    assert {o.id for o in q.read_new(clocked)} == set(ids)
    CaseDetectionJob(config(), clocked, None, clock=clock).run_once()
    clock.advance(15)
    CaseDetectionJob(config(), clocked, None, clock=clock).run_once()  # a restart: nothing new
    assert _states(clocked)[("helpdesk", CASE_SEVERE)].observations == 25
    # Two runs saving from the same read: the second saves nothing.
    clock.advance(15)
    more = feed.cases("helpdesk", 5, 0.2)
    cursor = q.read_cursor(clocked)
    read = q.read_new(clocked)
    assert {o.id for o in read} == set(more)
    now = datetime.fromtimestamp(clock.time(), tz=UTC)
    detector_saves.save(clocked, q.MARKS, [], cursor, [o.id for o in read], now)
    with pytest.raises(LeaseLost):
        detector_saves.save(clocked, q.MARKS, [], cursor, [o.id for o in read], now)
    assert q.read_new(clocked) == []


def test_a_replica_without_the_lease_saves_nothing(clocked: Store, clock: ManualClock) -> None:
    feed = CaseFeed(clocked, clock)
    CaseDetectionJob(config(), clocked, None, clock=clock).run_once()  # the first run
    clock.advance(15)
    feed.cases("helpdesk", 10, 0.2)
    now = datetime.fromtimestamp(clock.time(), tz=UTC)
    assert Leases(clocked).acquire("case_detection", "replica-b", now, 60)
    lapsed = CaseDetectionJob(config(), clocked, None, clock=clock, lease_owner="replica-a")
    with pytest.raises(LeaseLost):
        lapsed.run_once()
    assert len(q.read_new(clocked)) == 10  # nothing marked: the holder reads them
    holder = CaseDetectionJob(config(), clocked, None, clock=clock, lease_owner="replica-b")
    holder.run_once()
    assert q.read_new(clocked) == []
    assert _states(clocked)[("helpdesk", CASE_SEVERE)].observations == 10


def _job_names(store: Store, clock: ManualClock, **sections: Any) -> list[str]:
    settings = Settings(storage={"url": store.url, "retention_days": None}, **sections)
    metrics = Metrics(CollectorRegistry())
    jobs = build_jobs(settings, store, metrics, clock, inputs=read_job_inputs(settings))
    try:
        return [j.name for j in jobs]
    finally:
        for j in jobs:
            j.close()


def test_the_daemon_builds_the_case_detection_job_with_cases_and_detection(
    clocked: Store, clock: ManualClock
) -> None:
    assert _job_names(clocked, clock).count("case_detection") == 1
    assert "case_detection" not in _job_names(clocked, clock, cases={"enabled": False})
    assert "case_detection" not in _job_names(clocked, clock, detection={"enabled": False})
