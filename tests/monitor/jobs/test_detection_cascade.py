"""The detection job under the cascade: every drawn turn is fed to the cell-conditional
detectors (its stored cheap cell and probability), a turn with no cell stored is counted left
out, and a state restarted from the store continues.

The traffic is simulated as the cascade draws it: each turn of traffic is severe for the LLM
judge with probability p, the cheap look puts it in a cell from a distribution that depends on
whether it is severe (a cheap look of medium agreement), and the turn is drawn (stored, with its
probability and cell) with its cell's probability. Only drawn turns reach the store, as in the
daemon. Seeds are fixed; nothing waits on time (the clock is a ManualClock).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from monitor.jobs.detection import DetectionJob
from monitor.jobs.recorders import DetectionRecorder
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.sampling.cascade import CELLS, CascadePolicy, DrawLedger
from monitor.scoring.turn import DEFAULT_CRITICAL_METRICS
from monitor.stats.cell_cusum import CellCalibration
from monitor.storage.store import Store
from tests.fixtures.databases import make_turn
from tests.fixtures.detection import Feed, config, verdict

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
CRITICAL = list(DEFAULT_CRITICAL_METRICS)
ORDER = ("severe", "moderate", "minor", "none")
# P(cell | clean turn), P(cell | severe turn): the bench's medium agreement (AUROC 0.81).
CLEAN = (0.04, 0.16, 0.30, 0.50)
SEVERE = (0.40, 0.30, 0.20, 0.10)
# The cascade's probabilities per cell: the severe cell at 1, the others floored low.
PI = {"severe": 1.0, "moderate": 0.3, "minor": 0.05, "none": 0.02}
TRAFFIC_PER_RUN = 2000  # turns of traffic between two runs of the job (15 s)
LABELS = {"assistant": "helpdesk", "signal": "turn_severe"}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start=NOW.timestamp())


@pytest.fixture
def clocked(db_url: str, clock: ManualClock) -> Iterator[Store]:
    s = Store(db_url, clock=clock)
    s.migrate()
    yield s
    s.close()


class Cascade:
    """Traffic drawn as the cascade draws it, the drawn turns stored with probability and cell."""

    def __init__(self, store: Store, clock: ManualClock, seed: int) -> None:
        self.store, self.clock = store, clock
        self.rng = np.random.default_rng(seed)
        self.ledger = DrawLedger(CascadePolicy(CELLS, 100.0, clock))
        store.draws = self.ledger
        self.n = 0

    def traffic(self, turns: int, p: float, *, at: datetime | None = None) -> int:
        """``turns`` turns of traffic with a severe rate ``p``; stores the drawn ones."""
        when = at or datetime.fromtimestamp(self.clock.time(), tz=UTC)
        severe = self.rng.random(turns) < p
        u = self.rng.random(turns)
        d = self.rng.random(turns)
        clean_cells = np.searchsorted(np.cumsum(CLEAN), u, side="right").clip(0, 3)
        severe_cells = np.searchsorted(np.cumsum(SEVERE), u, side="right").clip(0, 3)
        cells = np.where(severe, severe_cells, clean_cells)
        stored = []
        for y, k, draw in zip(severe, cells, d, strict=True):
            self.n += 1
            cell = ORDER[int(k)]
            if draw >= PI[cell]:
                continue
            event_id = f"c{self.n}"
            self.ledger.drawn(event_id, PI[cell], cell)
            turn = make_turn(event_id, assistant="helpdesk", timestamp=when.isoformat())
            stored.append((turn, verdict(turn, bool(y))))
        self.store.save_many(stored)
        return len(stored)


def job_for(store: Store, clock: ManualClock, metrics: Metrics | None = None) -> DetectionJob:
    recorder = None if metrics is None else DetectionRecorder(metrics)
    return DetectionJob(config(), CRITICAL, store, recorder, clock=clock, cascade=True)


def reference(cascade: Cascade) -> None:
    """Two days ago, 40,000 turns of traffic at 5 % severe: ~5,300 drawn turns."""
    past = NOW - timedelta(days=2)
    for _ in range(20):
        cascade.traffic(TRAFFIC_PER_RUN, 0.05, at=past)


def test_every_drawn_turn_is_observed_and_a_step_alarms(clocked: Store, clock: ManualClock) -> None:
    cascade = Cascade(clocked, clock, seed=3)
    reference(cascade)
    metrics = Metrics(CollectorRegistry())
    job = job_for(clocked, clock, metrics)
    job.run_once()  # the history: the reference, never fed
    fed = 0
    for _ in range(10):  # in control: 20,000 turns of traffic, no page
        clock.advance(15)
        fed += cascade.traffic(TRAFFIC_PER_RUN, 0.05)
        rows = {r.signal.name: r for r in job.run_once()}
    turn = rows["turn_severe"]
    assert turn.armed and isinstance(turn.calibration, CellCalibration)
    assert set(turn.calibration.cells) == {"severe@1", "moderate", "minor", "none"}
    assert turn.observations == fed  # every drawn turn, not the ~1 % below the floor
    assert job.left_out == 0
    assert job.alarms_raised == 0
    base = metrics.registry.get_sample_value("casewatch_detector_baseline_rate", LABELS)
    assert base is not None and 0.04 < base < 0.06  # the traffic's rate, not the draw's (~20 %)

    runs = 0
    while job.alarms_raised == 0 and runs < 20:  # 5 % -> 15 %
        clock.advance(15)
        cascade.traffic(TRAFFIC_PER_RUN, 0.15)
        rows = {r.signal.name: r for r in job.run_once()}
        runs += 1
    assert job.alarms_raised >= 1, "a 5 -> 15 % step went unseen over 40,000 turns of traffic"
    assert runs <= 5  # the bench's delay at this budget is ~800 turns of traffic
    assert metrics.registry.get_sample_value("casewatch_detector_alarm", LABELS) == 1
    since = metrics.registry.get_sample_value("casewatch_detector_rate_since_change", LABELS)
    # Weighted by 1/pi: the traffic's rate since the change (15 %), not the draw's (~40 %).
    assert since is not None and 0.05 < since < 0.35


def test_a_stream_without_change_stays_within_the_false_alarm_budget(
    clocked: Store, clock: ManualClock
) -> None:
    # The budget: one false page per 30 days for the deployment. This stream lasts 60 runs of
    # 15 s (15 minutes, 120,000 turns of traffic, ~16,000 drawn): the calibration allows
    # 15 / (30 * 24 * 60) = 3.5e-4 false pages over it, so a page here is a miscalibration
    # (a plain Bernoulli CUSUM on the population's rate pages within the first runs: the draws
    # are ~20 % severe against a 5 % baseline), not bad luck.
    cascade = Cascade(clocked, clock, seed=11)
    reference(cascade)
    job = job_for(clocked, clock)
    job.run_once()
    peak = 0.0
    for _ in range(60):
        clock.advance(15)
        cascade.traffic(TRAFFIC_PER_RUN, 0.05)
        rows = {r.signal.name: r for r in job.run_once()}
        peak = max(peak, *(r.statistic for r in rows.values()))
    assert rows["turn_severe"].armed
    assert rows["turn_severe"].observations > 10_000
    assert job.alarms_raised == 0
    assert peak < 1.0


def test_a_turn_without_a_cell_is_left_out_with_its_reason(
    clocked: Store, clock: ManualClock
) -> None:
    cascade = Cascade(clocked, clock, seed=5)
    reference(cascade)
    metrics = Metrics(CollectorRegistry())
    job = job_for(clocked, clock, metrics)
    job.run_once()
    clock.advance(15)
    drawn = cascade.traffic(TRAFFIC_PER_RUN, 0.05)
    clocked.draws = None  # stored without its draw (evicted from the ledger, or uniform)
    feed = Feed(clocked, clock, seed=2)
    feed.turns("helpdesk", 7, 0.05)
    with capture_logs() as logs:
        rows = {r.signal.name: r for r in job.run_once()}
        clock.advance(15)
        feed.turns("helpdesk", 1, 0.05)
        job.run_once()
    assert rows["turn_severe"].observations == drawn
    left_out = metrics.registry.get_sample_value(
        "casewatch_detector_left_out_total", {"assistant": "helpdesk", "reason": "no_cell"}
    )
    assert left_out == job.left_out == 8
    warned = [e for e in logs if e.get("reason") == "no_cell"]
    assert len(warned) == 1


def test_a_restart_continues_the_cell_conditional_statistics(
    clocked: Store, clock: ManualClock
) -> None:
    cascade = Cascade(clocked, clock, seed=7)
    reference(cascade)
    job_for(clocked, clock).run_once()
    fed = 0
    for _ in range(3):
        clock.advance(15)
        fed += cascade.traffic(TRAFFIC_PER_RUN, 0.05)
        before = {r.signal.name: r for r in job_for(clocked, clock).run_once()}  # restarts
    turn = before["turn_severe"]
    assert turn.observations == fed
    again = {r.signal.name: r for r in job_for(clocked, clock).run_once()}["turn_severe"]
    assert again.observations == fed  # nothing new: nothing observed twice
    assert again.calibration == turn.calibration
    assert again.detector.states == turn.detector.states


def test_without_the_cascade_a_cascade_draw_is_left_out(clocked: Store, clock: ManualClock) -> None:
    feed = Feed(clocked, clock)
    feed.turns("helpdesk", 2000, 0.05, at=NOW - timedelta(days=2))
    metrics = Metrics(CollectorRegistry())
    job = DetectionJob(config(), CRITICAL, clocked, DetectionRecorder(metrics), clock=clock)
    job.run_once()
    clock.advance(15)
    feed.turns("helpdesk", 40, 0.05)
    ledger = DrawLedger(CascadePolicy(CELLS, 100.0, clock))
    clocked.draws = ledger
    ledger.drawn(f"e{feed.n + 1}", 0.5, "moderate")
    feed.turns("helpdesk", 1, 0.05)
    rows = {r.signal.name: r for r in job.run_once()}
    assert rows["turn_severe"].observations == 40
    left_out = metrics.registry.get_sample_value(
        "casewatch_detector_left_out_total", {"assistant": "helpdesk", "reason": "cascade_draw"}
    )
    assert left_out == job.left_out == 1


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
        config(), CRITICAL, clocked, DetectionRecorder(metrics), clock=clock, cascade=True
    )
    job.run_once()
    labels = {"assistant": "helpdesk", "signal": "turn_severe"}
    base = metrics.registry.get_sample_value("casewatch_detector_baseline_rate", labels)
    assert base is not None and 0.005 < base < 0.02
    armed = metrics.registry.get_sample_value("casewatch_detector_armed", labels)
    assert armed == 1
