"""The outcome detection job on a real store (SQLite and PostgreSQL): detectors on what users
said (negative feedback, hand-offs, reopenings per assistant) arm from the reference window's
outcomes, a step in an assistant's negative-feedback rate pages on the detection machinery's
gauges while the other signals and a stable assistant stay quiet, steady rates raise no alarm
(fixed seeds), and each outcome is observed once through duplicates, restarts, a racing save
and a lease held elsewhere."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from monitor.config.settings import Settings
from monitor.errors import LeaseLost
from monitor.jobs.build import build_jobs
from monitor.jobs.case_detection import CaseDetectionJob
from monitor.jobs.inputs import read_job_inputs
from monitor.jobs.outcome_detection import OutcomeDetectionJob
from monitor.jobs.recorders import DetectionRecorder
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.schema.outcome import OutcomeEvent
from monitor.stats.detection_signals import HANDOFF, NEGATIVE_FEEDBACK, REOPEN, Signal
from monitor.stats.detector_state import DetectorState
from monitor.storage import detector_saves
from monitor.storage import outcome_detection_queries as q
from monitor.storage.detection_queries import read_states
from monitor.storage.leases import Leases
from monitor.storage.outcomes import OutcomeRecords
from monitor.storage.store import Store
from tests.fixtures.detection import config

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SIGNALS = (NEGATIVE_FEEDBACK, HANDOFF, REOPEN)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start=NOW.timestamp())


@pytest.fixture
def clocked(db_url: str, clock: ManualClock) -> Iterator[Store]:
    s = Store(db_url, clock=clock)
    s.migrate()
    yield s
    s.close()


class OutcomeFeed:
    """Outcome events of assistants stored as the outcome step stores them, received at the
    shared manual clock's time (or ``at``): feedback negative with probability ``p``, cases
    handed off with ``p_handoff`` (else resolved, then reopened with ``p_reopen``); one
    transaction per ``save``."""

    def __init__(self, store: Store, clock: ManualClock, seed: int = 1) -> None:
        self.store, self.clock = store, clock
        self.rng = np.random.default_rng(seed)
        self.n = 0

    def save(self, events: list[dict[str, Any]], at: datetime | None = None) -> list[str]:
        """Store ``events`` (as built by the methods below with ``save=False``) at once."""
        when = at or datetime.fromtimestamp(self.clock.time(), tz=UTC)
        records = OutcomeRecords(self.store, ManualClock(start=when.timestamp()))
        parsed = [OutcomeEvent.model_validate({**e, "timestamp": when.isoformat()}) for e in events]
        saved = records.save([(e, None) for e in parsed])
        return [s.event.outcome_id for s in saved.inserted]

    def _id(self) -> str:
        self.n += 1
        return f"o{self.n}"

    def feedback(
        self, assistant: str, count: int, p: float, *, at: datetime | None = None
    ) -> list[str]:
        return self.save(self.feedback_events(assistant, count, p), at)

    def feedback_events(self, assistant: str, count: int, p: float) -> list[dict[str, Any]]:
        return [
            {
                "outcome_id": self._id(),
                "kind": "feedback",
                "assistant": assistant,
                "turn_event_id": f"{assistant}-turn-{self.n}",
                "thumbs": "down" if x else "up",
            }
            for x in self.rng.random(count) < p
        ]

    def case_events(
        self, assistant: str, count: int, p_handoff: float, p_reopen: float
    ) -> list[dict[str, Any]]:
        events = []
        for h, r in zip(self.rng.random(count), self.rng.random(count), strict=True):
            case = f"{assistant}-case-{self.n}"
            kinds = ["handed_off"] if h < p_handoff else ["resolved"]
            if kinds == ["resolved"] and r < p_reopen:
                kinds.append("reopened")
            for kind in kinds:
                events.append(
                    {
                        "outcome_id": self._id(),
                        "kind": kind,
                        "assistant": assistant,
                        "conversation_id": case,
                    }
                )
        return events


def _gauge(m: Metrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def _states(store: Store) -> dict[tuple[str, str], DetectorState]:
    return {
        (str(r["assistant"]), str(r["signal"])): DetectorState.from_row(r)
        for r in read_states(store)
    }


def test_outcome_signal_names_round_trip() -> None:
    for name in SIGNALS:
        assert Signal.from_name(name).name == name
        assert Signal.from_name(name).outcome == name
    with pytest.raises(ValueError, match="negative_feedback"):
        Signal.from_name("feedback_whatever")


def test_what_each_outcome_observes() -> None:
    assert q.observes("feedback", "negative") == {NEGATIVE_FEEDBACK: True}
    assert q.observes("feedback", "neutral") == {NEGATIVE_FEEDBACK: False}
    assert q.observes("handed_off", None) == {HANDOFF: True}
    assert q.observes("resolved", None) == {HANDOFF: False, REOPEN: False}
    assert q.observes("reopened", None) == {REOPEN: True}
    assert q.observes("satisfaction", "negative") == {}


def test_a_step_in_negative_feedback_pages_once_and_the_rest_stays_quiet(
    clocked: Store, clock: ManualClock
) -> None:
    feed = OutcomeFeed(clocked, clock)
    history = []
    for name in ("canary", "stable"):
        history += feed.feedback_events(name, 1000, 0.10)
        history += feed.case_events(name, 1000, 0.20, 0.10)
    feed.save(history, at=NOW - timedelta(days=2))
    metrics = Metrics(CollectorRegistry())
    job = OutcomeDetectionJob(config(), clocked, DetectionRecorder(metrics), clock=clock)
    job.run_once()  # the first run: history, arms from the reference window
    for signal in SIGNALS:
        assert _gauge(metrics, "casewatch_detector_armed", assistant="canary", signal=signal) == 1
    base = _gauge(
        metrics, "casewatch_detector_baseline_rate", assistant="canary", signal=NEGATIVE_FEEDBACK
    )
    assert base is not None and 0.07 < base < 0.13
    for minute in range(40):
        clock.advance(15)
        events = []
        for name in ("canary", "stable"):
            worse = name == "canary" and minute >= 10
            events += feed.feedback_events(name, 10, 0.40 if worse else 0.10)
            events += feed.case_events(name, 10, 0.20, 0.10)
        feed.save(events)
        job.run_once()
    alarm = "casewatch_detector_alarm"
    assert _gauge(metrics, alarm, assistant="canary", signal=NEGATIVE_FEEDBACK) == 1
    for signal in (HANDOFF, REOPEN):
        assert _gauge(metrics, alarm, assistant="canary", signal=signal) == 0
    for signal in SIGNALS:
        assert _gauge(metrics, alarm, assistant="stable", signal=signal) == 0
    assert job.alarms_raised == 1  # latched: one page
    assert _gauge(metrics, "casewatch_detector_last_run_timestamp_seconds") == clock.time()
    states = _states(clocked)
    assert states[("canary", NEGATIVE_FEEDBACK)].observations == 400
    change = states[("canary", NEGATIVE_FEEDBACK)].change_point
    assert change is not None and change >= NOW + timedelta(seconds=15 * 5)
    # The case detectors beside it leave the outcome detectors' rows alone.
    cases = CaseDetectionJob(config(), clocked, None, clock=clock)
    cases.run_once()
    cases.run_once()
    after = _states(clocked)
    assert after[("canary", NEGATIVE_FEEDBACK)].detector.latched is not None
    assert after[("canary", NEGATIVE_FEEDBACK)].observations == 400


@pytest.mark.parametrize("seed", [1, 2])
def test_steady_rates_raise_no_alarm(clocked: Store, clock: ManualClock, seed: int) -> None:
    """Three assistants at steady rates for 20 runs (6,000 outcomes each per signal family):
    at a budget of one false alarm in 30 days, none is raised (fixed seeds)."""
    feed = OutcomeFeed(clocked, clock, seed=seed)
    names = ("a", "b", "c")
    history = []
    for name in names:
        history += feed.feedback_events(name, 1000, 0.10)
        history += feed.case_events(name, 1000, 0.30, 0.15)
    feed.save(history, at=NOW - timedelta(days=2))
    job = OutcomeDetectionJob(config(), clocked, None, clock=clock)
    job.run_once()
    for _ in range(20):
        clock.advance(30)
        events = []
        for name in names:
            events += feed.feedback_events(name, 300, 0.10)
            events += feed.case_events(name, 300, 0.30, 0.15)
        feed.save(events)
        job.run_once()
    states = _states(clocked)
    assert all(states[(n, s)].armed for n in names for s in SIGNALS)
    assert states[("a", NEGATIVE_FEEDBACK)].observations == 6000
    assert job.alarms_raised == 0


def test_each_outcome_is_observed_once_through_duplicates_restarts_and_races(
    clocked: Store, clock: ManualClock
) -> None:
    feed = OutcomeFeed(clocked, clock)
    feed.feedback("helpdesk", 30, 0.1, at=NOW - timedelta(days=2))
    OutcomeDetectionJob(config(), clocked, None, clock=clock).run_once()  # history
    assert q.read_new(clocked) == []  # the history is marked, not fed
    clock.advance(15)
    ids = feed.feedback("helpdesk", 25, 0.2)
    # The same events again (a replay): one stored row each, so one observation each.
    replay = OutcomeFeed(clocked, clock)
    replay.n = feed.n - 25
    assert replay.feedback("helpdesk", 25, 0.2) == []
    assert {o.id for o in q.read_new(clocked)} == set(ids)
    OutcomeDetectionJob(config(), clocked, None, clock=clock).run_once()
    clock.advance(15)
    OutcomeDetectionJob(config(), clocked, None, clock=clock).run_once()  # a restart
    assert _states(clocked)[("helpdesk", NEGATIVE_FEEDBACK)].observations == 25
    # Two runs saving from the same read: the second saves nothing.
    clock.advance(15)
    more = feed.feedback("helpdesk", 5, 0.2)
    cursor = q.read_cursor(clocked)
    read = q.read_new(clocked)
    assert {o.id for o in read} == set(more)
    now = datetime.fromtimestamp(clock.time(), tz=UTC)
    detector_saves.save(clocked, q.MARKS, [], cursor, [o.id for o in read], now)
    with pytest.raises(LeaseLost):
        detector_saves.save(clocked, q.MARKS, [], cursor, [o.id for o in read], now)
    assert q.read_new(clocked) == []


def test_a_replica_without_the_lease_saves_nothing(clocked: Store, clock: ManualClock) -> None:
    feed = OutcomeFeed(clocked, clock)
    OutcomeDetectionJob(config(), clocked, None, clock=clock).run_once()  # the first run
    clock.advance(15)
    feed.feedback("helpdesk", 10, 0.2)
    now = datetime.fromtimestamp(clock.time(), tz=UTC)
    assert Leases(clocked).acquire("outcome_detection", "replica-b", now, 60)
    lapsed = OutcomeDetectionJob(config(), clocked, None, clock=clock, lease_owner="replica-a")
    with pytest.raises(LeaseLost):
        lapsed.run_once()
    assert len(q.read_new(clocked)) == 10  # nothing marked: the holder reads them
    holder = OutcomeDetectionJob(config(), clocked, None, clock=clock, lease_owner="replica-b")
    holder.run_once()
    assert q.read_new(clocked) == []
    assert _states(clocked)[("helpdesk", NEGATIVE_FEEDBACK)].observations == 10


def test_pinned_baselines_arm_at_once_under_the_outcome_signal_names(
    clocked: Store, clock: ManualClock
) -> None:
    pinned = config(baselines={"helpdesk": {NEGATIVE_FEEDBACK: 0.1}})
    rows = OutcomeDetectionJob(pinned, clocked, None, clock=clock).run_once()
    by_signal = {r.signal.name: r for r in rows if r.assistant == "helpdesk"}
    assert by_signal[NEGATIVE_FEEDBACK].baseline_source == "pinned"
    assert by_signal[NEGATIVE_FEEDBACK].armed
    assert not by_signal[HANDOFF].armed  # no reference, not pinned


def _job_names(store: Store, clock: ManualClock, **sections: Any) -> list[str]:
    settings = Settings(storage={"url": store.url, "retention_days": None}, **sections)
    metrics = Metrics(CollectorRegistry())
    jobs = build_jobs(settings, store, metrics, clock, inputs=read_job_inputs(settings))
    try:
        return [j.name for j in jobs]
    finally:
        for j in jobs:
            j.close()


def test_the_daemon_builds_the_outcome_detection_job_with_detection(
    clocked: Store, clock: ManualClock
) -> None:
    assert _job_names(clocked, clock).count("outcome_detection") == 1
    assert "outcome_detection" not in _job_names(clocked, clock, detection={"enabled": False})
