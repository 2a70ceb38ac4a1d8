"""The daemon's scheduled jobs, built from the settings (each feature adds its block here)."""

from __future__ import annotations

from monitor.clock import Clock
from monitor.exporter import Metrics
from monitor.jobs.retention import RetentionJob
from monitor.jobs.scheduler import Job
from monitor.settings import Settings
from monitor.storage.store import Store


def build_jobs(settings: Settings, store: Store, metrics: Metrics, clock: Clock) -> list[Job]:
    jobs: list[Job] = []
    storage = settings.storage
    if storage.retention_days is not None:
        jobs.append(
            RetentionJob(
                store,
                storage.retention_days,
                clock=clock,
                interval_seconds=storage.retention_interval_seconds,
            )
        )
    return jobs
