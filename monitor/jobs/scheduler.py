"""Scheduled jobs on APScheduler, each run by one replica at a time under a database lease.

A job is anything with a ``name``, an ``interval_seconds`` and a ``run()``. Every tick the
scheduler takes (or renews) the job's lease row; the replica that holds it runs the job, the
others count the tick as ``skipped``. A lease outlives its interval by ``lease_margin_seconds``,
so when its holder dies another replica takes the job over within one interval plus the margin.
A failing run is logged and counted and never touches the stream.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, Protocol

import structlog
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from monitor.clock import Clock, SystemClock
from monitor.exporter import Metrics
from monitor.jobs.recorders import JobRunRecorder
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


def default_owner() -> str:
    """host:pid:random, unique per process even when pods share a hostname."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


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
    ) -> None:
        self._leases = Leases(store)
        self._metrics = JobRunRecorder(metrics)
        self.owner = owner or default_owner()
        self._clock = clock or SystemClock()
        self._margin = lease_margin_seconds
        self._jobs: dict[str, _Entry] = {}
        self._scheduler: BackgroundScheduler | None = None

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

    def _lease(self, job: Job) -> bool:
        return self._leases.acquire(
            job.name, self.owner, self._now(), job.interval_seconds + self._margin
        )

    def run_once(self, name: str) -> Outcome:
        """Run ``name`` now if this replica holds (or can take) its lease."""
        entry = self._jobs[name]
        with entry.lock:
            outcome = self._run(entry.job)
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
        try:
            job.run()
        except Exception:
            log.exception("scheduled job failed; next try at its next interval", job=job.name)
            return "failed"
        try:
            self._lease(job)  # renewed after a long run, so the lease never lapses mid-interval
        except Exception:
            log.warning("job lease renewal failed", job=job.name, exc_info=True)
        return "ok"

    def start(self) -> None:
        """Run every job now and then every interval, on APScheduler's background thread."""
        if self._scheduler is not None or not self._jobs:
            return
        # One worker per job: a slow drift run never delays the retention purge.
        scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(max_workers=len(self._jobs))},
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
        """Stop scheduling, wait up to ``timeout_s`` for running jobs, release held leases."""
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is None:
            return
        done = threading.Event()

        def _shutdown() -> None:
            scheduler.shutdown(wait=True)
            done.set()

        # APScheduler's wait has no limit; a purge stuck on the database must not hold the exit.
        threading.Thread(target=_shutdown, name="jobs-shutdown", daemon=True).start()
        if not done.wait(timeout_s):
            log.warning("scheduled jobs still running at shutdown; abandoned", timeout_s=timeout_s)
        for name in self._jobs:
            try:
                self._leases.release(name, self.owner)
            except Exception:
                log.warning("job lease release failed", job=name, exc_info=True)
