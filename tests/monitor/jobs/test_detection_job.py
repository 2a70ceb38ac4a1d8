"""The detection job on a real store: arming, alarms, the cursor under out-of-order commits,
and state that survives a restart and a lease moving to another replica."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from monitor.errors import LeaseLost
from monitor.jobs.detection import DetectionJob
from monitor.jobs.recorders import DetectionRecorder
from monitor.jobs.scheduler import JobScheduler
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.schema.turn import TurnEvent, Verdict
from monitor.scoring.turn import DEFAULT_CRITICAL_METRICS
from monitor.stats.baseline_policy import RATE_WINDOW_S
from monitor.stats.detection import Detector
from monitor.stats.detector_state import DetectorState
from monitor.storage.detection_queries import read_states
from monitor.storage.leases import Leases
from monitor.storage.store import Store
from monitor.storage.tables import turn_row, verdict_row
from tests.fixtures.databases import make_turn
from tests.fixtures.detection import Feed, config, verdict

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
CRITICAL = list(DEFAULT_CRITICAL_METRICS)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start=NOW.timestamp())


@pytest.fixture
def clocked(db_url: str, clock: ManualClock) -> Store:
    s = Store(db_url, clock=clock)
    s.migrate()
    yield s
    s.close()


def _gauge(m: Metrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def _seed_reference(feed: Feed, *names: str) -> None:
    for name in names:
        feed.turns(name, 2000, 0.05, at=NOW - timedelta(days=2))


def test_a_regression_pages_once_and_the_stable_assistant_stays_quiet(
    clocked: Store, clock: ManualClock
) -> None:
    feed = Feed(clocked, clock)
    _seed_reference(feed, "canary", "stable")
    metrics = Metrics(CollectorRegistry())
    job = DetectionJob(config(), CRITICAL, clocked, DetectionRecorder(metrics), clock=clock)
    job.run_once()
    assert (
        _gauge(metrics, "casewatch_detector_armed", assistant="canary", signal="turn_severe") == 1
    )
    base = _gauge(
        metrics, "casewatch_detector_baseline_rate", assistant="canary", signal="turn_severe"
    )
    assert base is not None and 0.03 < base < 0.07
    step = None
    for minute in range(60):
        clock.advance(15)
        if minute == 10:
            step = clock.time()
        feed.turns("stable", 30, 0.05)
        feed.turns("canary", 30, 0.30 if step is not None else 0.05)
        job.run_once()
    assert step is not None
    g = "casewatch_detector_alarm"
    assert _gauge(metrics, g, assistant="canary", signal="turn_severe") == 1
    assert _gauge(metrics, g, assistant="stable", signal="turn_severe") == 0
    for metric in CRITICAL:
        assert _gauge(metrics, g, assistant="stable", signal=f"{metric}_severe") == 0
    assert job.alarms_raised == 1 + len(CRITICAL)  # every severe turn is severe on each metric
    cp = _gauge(
        metrics,
        "casewatch_detector_change_point_timestamp_seconds",
        assistant="canary",
        signal="turn_severe",
    )
    assert cp is not None and step - 60 <= cp <= step + 120
    since = _gauge(
        metrics, "casewatch_detector_rate_since_change", assistant="canary", signal="turn_severe"
    )
    assert since is not None and 0.2 < since < 0.4
    stored = {(r["assistant"], r["signal"]): r for r in read_states(clocked)}
    assert stored[("canary", "turn_severe")]["alarm"] is True
    assert stored[("canary", "turn_severe")]["change_point"] is not None
    assert stored[("stable", "turn_severe")]["alarm"] is False


def test_too_few_reference_turns_is_not_armed_never_no_regression(
    clocked: Store, clock: ManualClock
) -> None:
    feed = Feed(clocked, clock)
    feed.turns("fresh", 100, 0.05, at=NOW - timedelta(days=1))
    metrics = Metrics(CollectorRegistry())
    job = DetectionJob(config(), CRITICAL, clocked, DetectionRecorder(metrics), clock=clock)
    for _ in range(5):
        clock.advance(15)
        feed.turns("fresh", 50, 0.9)
        job.run_once()
    labels = {"assistant": "fresh", "signal": "turn_severe"}
    assert _gauge(metrics, "casewatch_detector_armed", **labels) == 0
    assert _gauge(metrics, "casewatch_detector_alarm", **labels) == 0
    rate = _gauge(metrics, "casewatch_detector_baseline_rate", **labels)
    assert rate is not None and rate != rate  # NaN: no baseline


def test_judge_failed_verdicts_are_not_observations(clocked: Store, clock: ManualClock) -> None:
    feed = Feed(clocked, clock)
    _seed_reference(feed, "helpdesk")
    job = DetectionJob(config(), CRITICAL, clocked, None, clock=clock)
    job.run_once()
    clock.advance(15)
    feed.turns("helpdesk", 40, 0.05)
    feed.turns("helpdesk", 25, 0.0, failed=True)
    rows = {r.signal.name: r for r in job.run_once() if r.assistant == "helpdesk"}
    assert rows["turn_severe"].observations == 40
    assert rows["hallucination_severe"].observations == 40


def _insert(conn: sa.Connection, turn: TurnEvent, v: Verdict, stored_at: datetime) -> None:
    from monitor.storage.tables import turns, verdicts

    conn.execute(sa.insert(turns), [turn_row(turn, stored_at)])
    conn.execute(sa.insert(verdicts), [verdict_row(v, stored_at)])


def test_the_cursor_neither_skips_nor_double_counts_out_of_order_commits(
    pg_url: str, clock: ManualClock, request: pytest.FixtureRequest
) -> None:
    store = Store(pg_url, clock=clock)
    store.migrate()
    try:
        feed = Feed(store, clock)
        _seed_reference(feed, "helpdesk")
        job = DetectionJob(config(), CRITICAL, store, None, clock=clock)
        job.run_once()
        engine = sa.create_engine(store.url)
        clock.advance(5)
        stamp = datetime.fromtimestamp(clock.time(), tz=UTC)
        slow = engine.connect()
        tx = slow.begin()
        request.addfinalizer(slow.close)  # a failed assertion must not leave it open
        # The slow transaction draws the lower id and the earlier stamp, then commits last.
        early = make_turn("slow-1", assistant="helpdesk")
        _insert(slow, early, verdict(early, True), stamp)
        with engine.begin() as fast:
            for i in range(3):
                t = make_turn(f"fast-{i}", assistant="helpdesk")
                _insert(fast, t, verdict(t, False), stamp + timedelta(seconds=2))
        pick = "SELECT id FROM verdicts WHERE event_id = :e"
        slow_id = slow.execute(sa.text(pick), {"e": "slow-1"}).scalar_one()
        with engine.connect() as c:
            fast_id = c.execute(sa.text(pick), {"e": "fast-0"}).scalar_one()
            invisible = c.execute(sa.text(pick), {"e": "slow-1"}).first()
        assert slow_id < fast_id and invisible is None  # a lower id, not yet visible
        clock.advance(10)
        obs = {r.signal.name: r.observations for r in job.run_once() if r.assistant == "helpdesk"}
        assert obs["turn_severe"] == 3
        tx.commit()
        slow.close()
        clock.advance(15)
        obs = {r.signal.name: r.observations for r in job.run_once() if r.assistant == "helpdesk"}
        assert obs["turn_severe"] == 4  # the late commit is read, once
        for _ in range(3):
            clock.advance(15)
            obs = {
                r.signal.name: r.observations for r in job.run_once() if r.assistant == "helpdesk"
            }
        assert obs["turn_severe"] == 4  # and never again
        engine.dispose()
    finally:
        store.close()


def test_state_survives_a_restart_and_a_lease_move(clocked: Store, clock: ManualClock) -> None:
    feed = Feed(clocked, clock, seed=3)
    _seed_reference(feed, "canary")
    cfg = config(interval_seconds=15)
    metrics = Metrics(CollectorRegistry())
    # Replica A runs the job under the lease, then dies without releasing it.
    a = JobScheduler(clocked, metrics, owner="replica-a", clock=clock, lease_margin_seconds=5)
    a.add(DetectionJob(cfg, CRITICAL, clocked, None, clock=clock))
    b_job = DetectionJob(cfg, CRITICAL, clocked, None, clock=clock)
    b = JobScheduler(clocked, metrics, owner="replica-b", clock=clock, lease_margin_seconds=5)
    b.add(b_job)
    assert a.run_once("detection") == "ok"
    for _ in range(4):
        clock.advance(15)
        feed.turns("canary", 40, 0.2)
        assert a.run_once("detection") == "ok"
    assert b.run_once("detection") == "skipped"  # A still holds the lease
    before = {
        r["signal"]: (r["observations"], r["statistic"], r["state"])
        for r in read_states(clocked)
        if r["assistant"] == "canary"
    }
    fresh = Detector(tuple(cfg.shifts)).to_dict()
    assert before["turn_severe"][0] == 160 and before["turn_severe"][2]["detector"] != fresh
    clock.advance(25)  # A's lease expires (interval + margin): B takes the job over
    assert b.run_once("detection") == "ok"
    after = {r.signal.name: r for r in b_job.run_once() if r.assistant == "canary"}
    row: DetectorState = after["turn_severe"]
    # B continued A's statistics: the same observations and CUSUM state, not a blind restart.
    assert row.observations == 160
    assert row.detector.to_dict() == before["turn_severe"][2]["detector"]
    clock.advance(15)
    feed.turns("canary", 40, 0.2)
    assert b.run_once("detection") == "ok"
    again = {r["signal"]: r for r in read_states(clocked) if r["assistant"] == "canary"}
    assert again["turn_severe"]["observations"] == 200


def test_concurrent_runs_do_not_lose_the_cursor(clocked: Store, clock: ManualClock) -> None:
    # The scheduler's per-job lock keeps a CLI run from overlapping a scheduled one.
    feed = Feed(clocked, clock)
    _seed_reference(feed, "helpdesk")
    sched = JobScheduler(clocked, Metrics(CollectorRegistry()), clock=clock)
    sched.add(DetectionJob(config(), CRITICAL, clocked, None, clock=clock))
    sched.run_once("detection")
    clock.advance(15)
    feed.turns("helpdesk", 30, 0.05)
    threads = [threading.Thread(target=sched.run_once, args=("detection",)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = {r["signal"]: r for r in read_states(clocked) if r["assistant"] == "helpdesk"}
    assert rows["turn_severe"]["observations"] == 30


def test_a_pinned_baseline_arms_on_the_first_run_without_any_history(
    clocked: Store, clock: ManualClock
) -> None:
    metrics = Metrics(CollectorRegistry())
    cfg = config(baselines={"fresh": {"turn_severe": 0.05}})
    job = DetectionJob(cfg, CRITICAL, clocked, DetectionRecorder(metrics), clock=clock)
    job.run_once()  # no verdict stored yet: the pinned assistant's detectors exist, armed
    labels = {"assistant": "fresh", "signal": "turn_severe"}
    assert _gauge(metrics, "casewatch_detector_armed", **labels) == 1
    assert _gauge(metrics, "casewatch_detector_baseline_rate", **labels) == 0.05
    # Its unpinned signals wait for a reference, as any assistant's do.
    metric = {"assistant": "fresh", "signal": f"{CRITICAL[0]}_severe"}
    assert _gauge(metrics, "casewatch_detector_armed", **metric) == 0
    feed = Feed(clocked, clock, seed=5)
    for _ in range(20):
        clock.advance(15)
        feed.turns("fresh", 30, 0.4)
        job.run_once()
    assert _gauge(metrics, "casewatch_detector_alarm", **labels) == 1


def test_an_unarmed_detector_arms_on_the_next_run_once_its_reference_fills(
    clocked: Store, clock: ManualClock
) -> None:
    feed = Feed(clocked, clock)
    feed.turns("helpdesk", 400, 0.05, at=NOW - timedelta(days=2))
    job = DetectionJob(config(baseline_refresh_seconds=600), CRITICAL, clocked, None, clock=clock)
    rows = {r.signal.name: r for r in job.run_once()}
    assert not rows["turn_severe"].armed and rows["turn_severe"].reference_turns == 400
    feed.turns("helpdesk", 200, 0.05, at=NOW - timedelta(days=1))
    clock.advance(15)  # one interval, far less than baseline_refresh_seconds
    rows = {r.signal.name: r for r in job.run_once()}
    assert rows["turn_severe"].armed and rows["turn_severe"].reference_turns == 600
    assert rows["turn_severe"].baseline_source == "reference"


def test_thresholds_follow_the_live_judged_turn_rate(clocked: Store, clock: ManualClock) -> None:
    feed = Feed(clocked, clock)
    _seed_reference(feed, "helpdesk")  # 2000 turns over the reference window: a slow stream
    # They were all stored at once, a burst of their own: let it leave the live-rate window.
    clock.advance(RATE_WINDOW_S + 60)
    job = DetectionJob(config(), CRITICAL, clocked, None, clock=clock)
    job.run_once()

    def turn_row() -> DetectorState:
        return next(r for r in job.run_once() if r.signal.name == "turn_severe")

    for _ in range(40):  # ten minutes at 1 judged turn per second
        clock.advance(15)
        feed.turns("helpdesk", 15, 0.05)
        slow = turn_row()
    # Never below the rate measured (turns arrive in batches, so it reads a little high).
    assert slow.turn_rate is not None and 1.0 <= slow.turn_rate < 1.7
    assert slow.calibration is not None
    for _ in range(4):  # one minute at 30 per second: the thresholds rise within it
        clock.advance(15)
        feed.turns("helpdesk", 450, 0.05)
        fast = turn_row()
    assert fast.turn_rate is not None and 30.0 <= fast.turn_rate < 50.0
    assert fast.calibration is not None
    for h_slow, h_fast in zip(
        slow.calibration.thresholds, fast.calibration.thresholds, strict=True
    ):
        assert h_fast > h_slow
    for _ in range(40):  # ten quiet minutes: the rate comes down again
        clock.advance(15)
        feed.turns("helpdesk", 15, 0.05)
        quiet = turn_row()
    assert quiet.turn_rate is not None and quiet.turn_rate < 2.5  # down once halved


class _LeaseMovesMidRun(DetectionJob):
    """Replica A's job, during whose run (after it read, before it saves) A's lease lapses and
    replica B takes it: a stalled process, a long GC pause."""

    def __init__(self, *args: object, move: Callable[[], None], **kw: object) -> None:
        super().__init__(*args, **kw)  # type: ignore[arg-type]
        self._move = move

    def _observe(self, *args: object, **kw: object) -> None:
        super()._observe(*args, **kw)  # type: ignore[arg-type]
        self._move()


def test_a_save_after_the_lease_moved_is_refused(clocked: Store, clock: ManualClock) -> None:
    feed = Feed(clocked, clock, seed=3)
    _seed_reference(feed, "canary")
    cfg = config(interval_seconds=15)
    metrics = Metrics(CollectorRegistry())
    a = JobScheduler(clocked, metrics, owner="replica-a", clock=clock, lease_margin_seconds=5)
    moved = threading.Event()

    def b_takes_the_lease() -> None:
        if moved.is_set():
            clock.advance(25)  # past A's lease (interval + margin)
            assert Leases(clocked).acquire("detection", "replica-b", _now(clock), 20)

    a.add(
        _LeaseMovesMidRun(
            cfg, CRITICAL, clocked, None, clock=clock, lease_owner="replica-a",
            move=b_takes_the_lease,
        )
    )  # fmt: skip
    assert a.run_once("detection") == "ok"
    clock.advance(15)
    feed.turns("canary", 40, 0.2)
    assert a.run_once("detection") == "ok"
    before = {r["signal"]: r for r in read_states(clocked) if r["assistant"] == "canary"}
    assert before["turn_severe"]["observations"] == 40
    clock.advance(15)
    feed.turns("canary", 40, 0.2)
    moved.set()
    assert a.run_once("detection") == "failed"  # LeaseLost: counted failed, nothing saved
    after = {r["signal"]: r for r in read_states(clocked) if r["assistant"] == "canary"}
    assert after["turn_severe"]["observations"] == 40
    assert after["turn_severe"]["state"] == before["turn_severe"]["state"]
    # B, now the holder, reads the 40 turns A could not save, once.
    b = JobScheduler(clocked, metrics, owner="replica-b", clock=clock, lease_margin_seconds=5)
    b.add(DetectionJob(cfg, CRITICAL, clocked, None, clock=clock, lease_owner="replica-b"))
    assert b.run_once("detection") == "ok"
    final = {r["signal"]: r for r in read_states(clocked) if r["assistant"] == "canary"}
    assert final["turn_severe"]["observations"] == 80


def test_a_job_without_the_lease_saves_nothing(clocked: Store, clock: ManualClock) -> None:
    # The fence alone, outside the scheduler: an owner that holds no lease saves nothing.
    job = DetectionJob(config(), CRITICAL, clocked, None, clock=clock, lease_owner="nobody")
    with pytest.raises(LeaseLost, match="no longer holds its lease"):
        job.run_once()
    assert read_states(clocked) == []


def _now(clock: ManualClock) -> datetime:
    return datetime.fromtimestamp(clock.time(), tz=UTC)


# ------------------------------------------------ exactly once, whenever a writer commits


class _Gate:
    """Holds one store's ``nth`` transaction at a real point of its life until released: a
    slow store, as the detectors meet it. ``engine_connect`` (waiting for a connection, before
    SQLite's write lock), ``begin`` or ``commit`` (PostgreSQL: after the INSERT drew its id,
    before COMMIT)."""

    def __init__(self, store: Store, event: str, *, nth: int = 1) -> None:
        self.reached, self.released = threading.Event(), threading.Event()
        self._nth, self._seen = nth, 0
        engine: sa.Engine = store._engine
        sa.event.listen(engine, event, self._hold)

    def _hold(self, conn: sa.Connection) -> None:
        self._seen += 1
        if self._seen == self._nth:
            self.reached.set()
            assert self.released.wait(60), "the test never released the gate"


def _observations(store: Store, assistant: str) -> int:
    rows = {r["signal"]: r for r in read_states(store) if r["assistant"] == assistant}
    return int(rows["turn_severe"]["observations"])


def _unobserved(store: Store) -> int:
    from monitor.storage.tables import verdicts

    with store.transaction(write=False) as conn:
        query = sa.select(sa.func.count()).where(verdicts.c.observed_at.is_(None))
        return int(conn.execute(query).scalar_one())


def test_a_commit_landing_long_after_its_stamp_is_observed_once(
    db_url: str, clock: ManualClock
) -> None:
    """Two replicas' store sessions: one stamps its verdict, then its commit is held (before
    the write lock on SQLite, after the INSERT on PostgreSQL) while the other writes and the
    detectors run for minutes, far past any re-read window; when it lands, it is observed
    once, like every other judged turn."""
    fast, late = Store(db_url, clock=clock), Store(db_url, clock=clock)
    fast.migrate()
    try:
        feed = Feed(fast, clock)
        _seed_reference(feed, "helpdesk")
        job = DetectionJob(config(), CRITICAL, fast, None, clock=clock)
        job.run_once()
        clock.advance(5)
        gate = _Gate(late, "commit" if fast.dialect == "postgresql" else "engine_connect")
        turn = make_turn("late-1", assistant="helpdesk", timestamp=_now(clock).isoformat())
        saved: list[bool] = []
        writer = threading.Thread(target=lambda: saved.append(late.save(turn, verdict(turn, True))))
        writer.start()
        assert gate.reached.wait(60)
        stored = 0
        for _ in range(20):  # five minutes of traffic and runs while the late commit waits
            clock.advance(15)
            feed.turns("helpdesk", 10, 0.05)
            stored += 10
            job.run_once()
        assert _observations(fast, "helpdesk") == stored
        gate.released.set()
        writer.join(60)
        assert saved == [True]
        for _ in range(3):
            clock.advance(15)
            job.run_once()
        assert _observations(fast, "helpdesk") == stored + 1  # the late one, once
        assert _unobserved(fast) == 0
    finally:
        late.close()
        fast.close()


def test_two_runs_from_one_read_do_not_count_a_verdict_twice(
    db_url: str, clock: ManualClock
) -> None:
    """Replica B's run reads the cursor, then replica A's run reads and saves the same
    verdicts before B reads on: B must not add them again over A's state."""
    a_store, b_store = Store(db_url, clock=clock), Store(db_url, clock=clock)
    a_store.migrate()
    try:
        feed = Feed(a_store, clock)
        _seed_reference(feed, "helpdesk")
        a = DetectionJob(config(), CRITICAL, a_store, None, clock=clock)
        b = DetectionJob(config(), CRITICAL, b_store, None, clock=clock)
        a.run_once()
        clock.advance(15)
        feed.turns("helpdesk", 30, 0.05)
        gate = _Gate(b_store, "begin", nth=2)  # after B read the cursor, before its states
        failures: list[BaseException] = []

        def run_b() -> None:
            try:
                b.run_once()
            except LeaseLost as exc:
                failures.append(exc)

        runner = threading.Thread(target=run_b)
        runner.start()
        assert gate.reached.wait(60)
        a.run_once()
        assert _observations(a_store, "helpdesk") == 30
        gate.released.set()
        runner.join(60)
        assert _observations(a_store, "helpdesk") == 30  # not 60
        assert [str(e) for e in failures] == [
            "the detectors' state was saved by another run since this run read it: "
            "nothing saved, the next run reads the verdicts again"
        ]
        clock.advance(15)
        feed.turns("helpdesk", 5, 0.05)
        b.run_once()  # B's next run reads again and goes on from A's state
        assert _observations(a_store, "helpdesk") == 35
        assert _unobserved(a_store) == 0
    finally:
        b_store.close()
        a_store.close()


def test_replicas_writing_while_the_detectors_run_are_each_observed_once(
    pg_url: str, clock: ManualClock
) -> None:
    """Four replicas' sessions store judged turns concurrently (ids drawn at insert, commits in
    any order) while the detection job runs again and again: every verdict is observed once."""
    store = Store(pg_url, clock=clock)
    store.migrate()
    writers = [Store(pg_url, clock=clock) for _ in range(4)]
    try:
        _seed_reference(Feed(store, clock), "helpdesk")
        job = DetectionJob(config(), CRITICAL, store, None, clock=clock)
        job.run_once()
        errors: list[BaseException] = []

        def write(k: int) -> None:
            try:
                for batch in range(25):
                    items = []
                    for i in range(4):
                        turn = make_turn(f"r{k}-{batch}-{i}", assistant="helpdesk")
                        items.append((turn, verdict(turn, i == 0)))
                    writers[k].save_many(items)
            except BaseException as exc:  # reported below, not lost with the thread
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            job.run_once()
        for t in threads:
            t.join()
        job.run_once()  # what committed after the last run's read
        assert errors == []
        assert _observations(store, "helpdesk") == 4 * 25 * 4
        assert _unobserved(store) == 0
    finally:
        for w in writers:
            w.close()
        store.close()


def test_the_former_overlap_setting_is_accepted_and_said_to_be_unused(clocked: Store) -> None:
    with capture_logs() as logs:
        DetectionJob(config(), CRITICAL, clocked, None)
        DetectionJob(config(overlap_seconds=60), CRITICAL, clocked, None)
    warned = [e for e in logs if "overlap_seconds" in e["event"]]
    assert len(warned) == 1 and warned[0]["log_level"] == "warning"


def test_a_backlog_is_fed_over_several_runs_each_verdict_once(
    clocked: Store, clock: ManualClock
) -> None:
    feed = Feed(clocked, clock)
    _seed_reference(feed, "helpdesk")
    job = DetectionJob(config(), CRITICAL, clocked, None, clock=clock, read_limit=40)
    job.run_once()
    clock.advance(15)
    feed.turns("helpdesk", 100, 0.05)
    seen = []
    for _ in range(4):
        job.run_once()
        seen.append(_observations(clocked, "helpdesk"))
        clock.advance(15)
    assert seen == [40, 80, 100, 100]
    assert _unobserved(clocked) == 0
