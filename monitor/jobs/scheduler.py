"""Scheduled jobs on APScheduler, each run by one replica at a time under a database lease.

A job's lifecycle, all of it here:

1. ``add``: the job is built (its configuration checked) and registered; ``start`` schedules
   every job now and then every ``interval_seconds``.
2. A run: the scheduler takes (or renews) the job's lease row; the replica that holds it runs
   ``job.run()``, the others count the tick as ``skipped``. While the run lasts, a keeper thread
   renews the lease every third of its time to live, so a run slower than its interval plus
   ``lease_margin_seconds`` never runs on a second replica at once. When its holder dies, the
   lease lapses and another replica takes the job over within one interval plus the margin.
   A failing run is logged and counted and never touches the stream.
3. ``shutdown``: scheduling stops; runs under way get ``timeout_s`` to finish, then are
   abandoned; every job's ``close()`` is called (an abandoned run's HTTP client is closed under
   it); the leases are released so another replica need not wait for them to expire.

Runs execute on daemon threads (``monitor.runtime.workers``), not on ``concurrent.futures`` ones,
which
the interpreter joins at exit: an abandoned run must not stretch a stop beyond its budget
(``monitor.stream.shutdown_budget.shutdown_budget_s``).
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, Protocol

import structlog
from apscheduler.executors.pool import BasePoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from monitor.jobs.recorders import JobRunRecorder
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import Clock, Deadline, SystemClock
from monitor.runtime.workers import DaemonThreadPool
from monitor.storage.leases import Leases
from monitor.storage.store import Store

log = structlog.get_logger(__name__)

Outcome = Literal["ok", "failed", "skipped"]
DEFAULT_LEASE_MARGIN_S = 60.0


class Job(Protocol):
    # A fixed word: the ``job`` label of casewatch_job_runs_total and the lease row's key.
    name: str
    interval_seconds: float

    def run(self) -> None:
        """One run; raising counts it ``failed``."""

    def close(self) -> None:
        """Release what the job holds (HTTP clients, pools); called once, at shutdown."""


def default_owner() -> str:
    """host:pid:random, unique per process even when pods share a hostname."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class _DaemonPool:
    """``DaemonThreadPool`` under the interface APScheduler's pool executors expect."""

    def __init__(self, workers: int) -> None:
        self._pool = DaemonThreadPool(workers, "job")
        self.submit = self._pool.submit

    def shutdown(self, wait: bool = True) -> None:
        self._pool.shutdown()  # never waits: ``JobScheduler.shutdown`` bounds the wait


class _DaemonExecutor(BasePoolExecutor):  # type: ignore[misc]  # APScheduler is untyped
    def __init__(self, workers: int) -> None:
        super().__init__(_DaemonPool(workers))


class _LeaseKeeper:
    """Renews a lease every ``period_s`` while a run lasts (on its own daemon thread)."""

    def __init__(self, renew: Callable[[], bool], period_s: float, job: str) -> None:
        self._renew = renew
        self._period = period_s
        self._job = job
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._keep, name=f"lease-{job}", daemon=True)

    def __enter__(self) -> _LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
        self._thread.join()

    def stop(self) -> None:
        """No more renewals (the run ended, or was abandoned at shutdown)."""
        self._stop.set()

    def _keep(self) -> None:
        while not self._stop.wait(self._period):
            try:
                if not self._renew():
                    log.error("job lease lost while running", job=self._job)
            except Exception:
                log.warning("job lease renewal failed", job=self._job, exc_info=True)


@dataclass(frozen=True)
class _Entry:
    job: Job
    lock: threading.Lock  # run_once from a test or the CLI never overlaps a scheduled run


class JobScheduler:
    def __init__(
        self,
        store: Store,
        metrics: Metrics,
        *,
        owner: str | None = None,
        clock: Clock | None = None,
        lease_margin_seconds: float = DEFAULT_LEASE_MARGIN_S,
        renew_every_s: float | None = None,
    ) -> None:
        """``renew_every_s``: how often a running job's lease is renewed (default: a third of
        its time to live, interval plus margin)."""
        self._leases = Leases(store)
        self._metrics = JobRunRecorder(metrics)
        self.owner = owner or default_owner()
        self._clock = clock or SystemClock()
        self._margin = lease_margin_seconds
        self._renew_every = renew_every_s
        self._jobs: dict[str, _Entry] = {}
        self._scheduler: BackgroundScheduler | None = None
        self._running: set[str] = set()
        self._keepers: set[_LeaseKeeper] = set()
        self._idle = threading.Condition()
        self._closed = False

    @property
    def job_names(self) -> list[str]:
        return sorted(self._jobs)

    def add(self, job: Job) -> None:
        if job.name in self._jobs:
            raise ValueError(f"a job named {job.name!r} is already scheduled")
        if job.interval_seconds <= 0:
            raise ValueError(f"job {job.name!r}: interval_seconds must be > 0")
        self._jobs[job.name] = _Entry(job, threading.Lock())

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock.time(), tz=UTC)

    def _ttl(self, job: Job) -> float:
        return job.interval_seconds + self._margin

    def _lease(self, job: Job) -> bool:
        return self._leases.acquire(job.name, self.owner, self._now(), self._ttl(job))

    def run_once(self, name: str) -> Outcome:
        """Run ``name`` now if this replica holds (or can take) its lease."""
        entry = self._jobs[name]
        with entry.lock:
            with self._idle:
                self._running.add(name)
            try:
                outcome = self._run(entry.job)
            finally:
                with self._idle:
                    self._running.discard(name)
                    self._idle.notify_all()
        self._metrics.record_job_run(name, outcome, self._clock.time())
        return outcome

    def _run(self, job: Job) -> Outcome:
        try:
            if not self._lease(job):
                log.debug("job skipped: another replica holds its lease", job=job.name)
                return "skipped"
        except Exception:
            log.warning("job lease unavailable; run skipped as failed", job=job.name, exc_info=True)
            return "failed"
        period = self._renew_every if self._renew_every is not None else self._ttl(job) / 3
        keeper = _LeaseKeeper(lambda: self._lease(job), period, job.name)
        with self._idle:
            self._keepers.add(keeper)
        try:
            with keeper:
                job.run()
        except Exception:
            log.exception("scheduled job failed; next try at its next interval", job=job.name)
            return "failed"
        finally:
            with self._idle:
                self._keepers.discard(keeper)
        if self._closed:
            return "ok"  # finished after shutdown released its lease: leave it released
        try:
            self._lease(job)  # a full interval from the end of the run until the next tick
        except Exception:
            log.warning("job lease renewal failed", job=job.name, exc_info=True)
        return "ok"

    def start(self) -> None:
        """Run every job now and then every interval, on APScheduler's background thread."""
        if self._scheduler is not None or not self._jobs:
            return
        # One worker per job: a slow drift run never delays the retention purge.
        scheduler = BackgroundScheduler(
            executors={"default": _DaemonExecutor(len(self._jobs))},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
            timezone=UTC,
        )
        for name, entry in self._jobs.items():
            scheduler.add_job(
                self.run_once,
                IntervalTrigger(seconds=entry.job.interval_seconds, timezone=UTC),
                args=[name],
                id=name,
                name=name,
                next_run_time=datetime.now(UTC),
            )
        scheduler.start()
        self._scheduler = scheduler
        log.info("scheduled jobs started", jobs=self.job_names, owner=self.owner)

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Stop scheduling, wait up to ``timeout_s`` for running jobs, close every job and
        release the leases held. Returns within ``timeout_s`` plus the database calls."""
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is not None:
            scheduler.shutdown(wait=False)
        deadline = Deadline(timeout_s)  # real time, whatever clock the leases are stamped on
        with self._idle:
            while self._running:
                remaining = deadline.remaining() or 0.0
                if remaining <= 0:
                    log.warning(
                        "scheduled jobs still running at shutdown; abandoned",
                        jobs=sorted(self._running),
                        timeout_s=timeout_s,
                    )
                    break
                self._idle.wait(remaining)
            for keeper in self._keepers:  # an abandoned run must not take its lease back
                keeper.stop()
        self.close()
        for name in self._jobs:
            try:
                self._leases.release(name, self.owner)
            except Exception:
                log.warning("job lease release failed", job=name, exc_info=True)

    def close(self) -> None:
        """Close every job, once (an abandoned run's resources go with it)."""
        if self._closed:
            return
        self._closed = True
        for name, entry in self._jobs.items():
            try:
                entry.job.close()
            except Exception:
                log.warning("closing a job failed", job=name, exc_info=True)
