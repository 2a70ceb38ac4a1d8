"""The job scheduler: one replica at a time under a database lease; failures counted."""

from __future__ import annotations

import threading
import time

import pytest
from prometheus_client import CollectorRegistry

from monitor.clock import ManualClock
from monitor.exporter import Metrics
from monitor.jobs.scheduler import JobScheduler
from monitor.storage.leases import Leases
from monitor.storage.store import Store


class CountingJob:
    def __init__(self, name: str = "drift", interval_seconds: float = 60.0) -> None:
        self.name = name
        self.interval_seconds = interval_seconds
        self.runs = 0
        self.fail_with: Exception | None = None
        self.ran = threading.Event()

    def run(self) -> None:
        self.runs += 1
        self.ran.set()
        if self.fail_with is not None:
            raise self.fail_with


@pytest.fixture
def store(db_url: str) -> Store:
    s = Store(db_url)
    s.migrate()
    yield s  # type: ignore[misc]
    s.close()


def _runs(registry: CollectorRegistry, job: str, outcome: str) -> float:
    value = registry.get_sample_value("casewatch_job_runs_total", {"job": job, "outcome": outcome})
    return value or 0.0


def test_two_replicas_never_both_run_a_job_and_the_other_takes_over_on_expiry(
    store: Store,
) -> None:
    clock = ManualClock()
    reg_a, reg_b = CollectorRegistry(), CollectorRegistry()
    a = JobScheduler(store, Metrics(reg_a), owner="a", clock=clock, lease_margin_seconds=30)
    b = JobScheduler(store, Metrics(reg_b), owner="b", clock=clock, lease_margin_seconds=30)
    job_a, job_b = CountingJob(), CountingJob()
    a.add(job_a)
    b.add(job_b)

    assert a.run_once("drift") == "ok"
    assert b.run_once("drift") == "skipped"
    clock.advance(60)  # a's next tick renews its lease before it expires
    assert a.run_once("drift") == "ok"
    assert b.run_once("drift") == "skipped"
    assert (job_a.runs, job_b.runs) == (2, 0)
    assert _runs(reg_b, "drift", "skipped") == 2

    clock.advance(60 + 30 + 1)  # a died: its lease (interval + margin) lapses
    assert b.run_once("drift") == "ok"
    assert a.run_once("drift") == "skipped"  # a came back: b holds it now
    assert (job_a.runs, job_b.runs) == (2, 1)
    assert reg_a.get_sample_value(
        "casewatch_job_last_success_timestamp_seconds", {"job": "drift"}
    ) == pytest.approx(clock.time() - 91)


def test_racing_replicas_get_exactly_one_lease(store: Store) -> None:
    leases = Leases(store)
    clock = ManualClock()
    from datetime import UTC, datetime

    now = datetime.fromtimestamp(clock.time(), tz=UTC)
    barrier = threading.Barrier(4)
    won: list[str] = []

    def race(owner: str) -> None:
        barrier.wait()
        if leases.acquire("retention", owner, now, 60):
            won.append(owner)

    threads = [threading.Thread(target=race, args=(f"r{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1
    assert leases.holder("retention", now) == won[0]


def test_a_failing_job_is_counted_and_the_next_run_goes_ahead(store: Store) -> None:
    registry = CollectorRegistry()
    scheduler = JobScheduler(store, Metrics(registry), owner="a", clock=ManualClock())
    job = CountingJob()
    job.fail_with = RuntimeError("the drift query timed out")
    scheduler.add(job)
    assert scheduler.run_once("drift") == "failed"
    job.fail_with = None
    assert scheduler.run_once("drift") == "ok"
    assert _runs(registry, "drift", "failed") == 1
    assert _runs(registry, "drift", "ok") == 1


def test_an_unreachable_database_counts_the_run_failed_without_running_it() -> None:
    store = Store("postgresql+psycopg://postgres@127.0.0.1:1/x")
    registry = CollectorRegistry()
    scheduler = JobScheduler(store, Metrics(registry), owner="a")
    job = CountingJob()
    scheduler.add(job)
    assert scheduler.run_once("drift") == "failed"
    assert job.runs == 0
    store.close()


def test_bad_jobs_are_refused(store: Store) -> None:
    scheduler = JobScheduler(store, Metrics(CollectorRegistry()))
    scheduler.add(CountingJob())
    with pytest.raises(ValueError, match="already scheduled"):
        scheduler.add(CountingJob())
    with pytest.raises(ValueError, match="interval_seconds must be > 0"):
        scheduler.add(CountingJob("other", interval_seconds=0))


def test_apscheduler_runs_the_jobs_at_start_and_shutdown_releases_the_lease(store: Store) -> None:
    registry = CollectorRegistry()
    scheduler = JobScheduler(store, Metrics(registry), owner="a")
    job = CountingJob(interval_seconds=3600)
    scheduler.add(job)
    scheduler.start()
    try:
        assert job.ran.wait(30), "the first run happens at start"
        deadline = time.monotonic() + 30
        while _runs(registry, "drift", "ok") < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _runs(registry, "drift", "ok") == 1
    finally:
        scheduler.shutdown(timeout_s=30)
    from datetime import UTC, datetime

    assert Leases(store).holder("drift", datetime.now(UTC)) is None
