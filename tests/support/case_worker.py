"""A replica's case job in a process of its own, for the tests that SIGKILL it mid-run:
``python -m tests.support.case_worker DB_URL JUDGE_BASE_URL OWNER`` builds the job from the
settings as the daemon does, on the real scheduler and its lease, runs it once and exits."""

from __future__ import annotations

import sys

from prometheus_client import CollectorRegistry

from monitor.config.settings import Settings
from monitor.jobs.build import build_jobs
from monitor.jobs.inputs import read_job_inputs
from monitor.jobs.scheduler import JobScheduler
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import SystemClock
from monitor.storage.store import Store
from tests.fixtures.judge_server import FAKE_JUDGE_KEY, FAKE_JUDGE_MODEL


def case_settings(db_url: str, base_url: str) -> Settings:
    """Only the case job, judging with one OpenAI-compatible judge at ``base_url``."""
    return Settings(
        judges={
            "llm": {
                "kind": "openai",
                "base_url": base_url,
                "model": FAKE_JUDGE_MODEL,
                "api_key": FAKE_JUDGE_KEY,
                "timeout_seconds": 10.0,
                "output_retries": 0,
                "transport_retries": 0,
            }
        },
        judge="llm",
        sampling={"budget_calls_per_hour": None, "budget_usd_per_hour": None},
        drift={"enabled": False},
        detection={"enabled": False},
        quality_estimate={"enabled": False},
        judge_canary={"enabled": False},
        storage={"url": db_url, "retention_days": None},
    )


def main(argv: list[str]) -> int:
    db_url, base_url, owner = argv
    settings = case_settings(db_url, base_url)
    store = Store(db_url)
    metrics = Metrics(CollectorRegistry())
    clock = SystemClock()
    scheduler = JobScheduler(store, metrics, owner=owner, clock=clock)
    for job in build_jobs(
        settings, store, metrics, clock, inputs=read_job_inputs(settings), lease_owner=owner
    ):
        scheduler.add(job)
    print("running", flush=True)
    outcome = scheduler.run_once("cases")
    print(outcome, flush=True)
    return 0 if outcome == "ok" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
