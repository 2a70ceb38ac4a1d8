"""The detection job under the cascade: the Bernoulli detectors observe the uniform part of the
cascade's draws (the turns below the floor) and count the others as left out, logged once."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from monitor.jobs.detection import DetectionJob
from monitor.jobs.recorders import DetectionRecorder
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.sampling.cascade import CELLS, CascadePolicy, DrawLedger
from monitor.sampling.sampler import sample_point
from monitor.scoring.turn import DEFAULT_CRITICAL_METRICS
from monitor.storage.store import Store
from tests.fixtures.detection import Feed, config

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
CRITICAL = list(DEFAULT_CRITICAL_METRICS)
FLOOR = 0.3


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start=NOW.timestamp())


@pytest.fixture
def clocked(db_url: str, clock: ManualClock) -> Iterator[Store]:
    s = Store(db_url, clock=clock)
    s.migrate()
    yield s
    s.close()


def test_only_the_uniform_part_of_the_cascade_draws_is_observed(
    clocked: Store, clock: ManualClock
) -> None:
    feed = Feed(clocked, clock)
    feed.turns("helpdesk", 2000, 0.05, at=NOW - timedelta(days=2))  # uniform reference
    metrics = Metrics(CollectorRegistry())
    job = DetectionJob(
        config(), CRITICAL, clocked, DetectionRecorder(metrics), clock=clock, uniform_below=FLOOR
    )
    job.run_once()
    clock.advance(15)
    ledger = DrawLedger(CascadePolicy(CELLS, 100.0, clock))
    clocked.draws = ledger
    first = feed.n + 1
    ids = [f"e{n}" for n in range(first, first + 80)]
    for event_id in ids:
        ledger.drawn(event_id, 0.5, "moderate")
    with capture_logs() as logs:
        feed.turns("helpdesk", 80, 0.05)
        rows = {r.signal.name: r for r in job.run_once()}
        clock.advance(15)
        ledger.drawn(f"e{feed.n + 1}", 0.5, "moderate")
        feed.turns("helpdesk", 1, 0.05)
        job.run_once()
    uniform = sum(1 for e in ids if sample_point(f"conv-{e}") < FLOOR)
    assert 0 < uniform < 80
    assert rows["turn_severe"].observations == uniform
    left_out = metrics.registry.get_sample_value(
        "casewatch_detector_left_out_total", {"assistant": "helpdesk", "reason": "cascade_draw"}
    )
    assert left_out == job.left_out >= 80 - uniform
    warned = [e for e in logs if "uniform part of the cascade" in e["event"]]
    assert len(warned) == 1


def test_without_the_cascade_every_judged_turn_is_observed(
    clocked: Store, clock: ManualClock
) -> None:
    feed = Feed(clocked, clock)
    feed.turns("helpdesk", 2000, 0.05, at=NOW - timedelta(days=2))
    job = DetectionJob(config(), CRITICAL, clocked, None, clock=clock)
    job.run_once()
    clock.advance(15)
    feed.turns("helpdesk", 40, 0.05)
    rows = {r.signal.name: r for r in job.run_once()}
    assert rows["turn_severe"].observations == 40
    assert job.left_out == 0


def test_a_reference_of_cascade_draws_gives_the_traffic_rate(
    clocked: Store, clock: ManualClock
) -> None:
    # 100 severe turns drawn at probability 1, 900 clean ones at 0.1: 9,100 turns of traffic
    # of which 100 severe (1.1 %), where the draws alone say 10 %.
    ledger = DrawLedger(CascadePolicy(CELLS, 100.0, clock))
    clocked.draws = ledger
    feed = Feed(clocked, clock)
    past = NOW - timedelta(days=2)
    for n in range(1, 101):
        ledger.drawn(f"e{n}", 1.0, "severe")
    feed.turns("helpdesk", 100, 1.0, at=past)
    for n in range(101, 1001):
        ledger.drawn(f"e{n}", 0.1, "none")
    feed.turns("helpdesk", 900, 0.0, at=past)
    metrics = Metrics(CollectorRegistry())
    job = DetectionJob(
        config(), CRITICAL, clocked, DetectionRecorder(metrics), clock=clock, uniform_below=FLOOR
    )
    job.run_once()
    labels = {"assistant": "helpdesk", "signal": "turn_severe"}
    base = metrics.registry.get_sample_value("casewatch_detector_baseline_rate", labels)
    assert base is not None and 0.005 < base < 0.02
