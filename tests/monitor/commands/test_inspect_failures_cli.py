"""``casewatch inspect failures`` and ``inspect failure MODE_ID`` through click, on SQLite and
PostgreSQL, over modes the failure-modes job found in stored verdicts."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from monitor.cli import main
from monitor.config.failure_modes import FailureModesConfig
from monitor.jobs.failure_modes import FailureModesJob
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.storage.store import Store
from tests.support.planted_failures import planted_turn, planted_turns
from tests.support.stored_failures import store_failed

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
POLICY = 6  # "policy fabricated" (hallucination: a critical metric, so the turns are severe)


@pytest.fixture
def grouped(store: Store) -> str:
    start = NOW - timedelta(days=7) + timedelta(hours=2)
    turns, _ = planted_turns(150, 3, noise=0.0, seed=31, start=start, span=timedelta(days=6.5))
    rng = random.Random(32)
    late = [planted_turn(POLICY, rng, NOW - timedelta(hours=3, minutes=-i), f"late-{i}")
            for i in range(12)]  # fmt: skip
    store_failed(store, [*turns, *late], "canary")
    job = FailureModesJob(FailureModesConfig(), store, Metrics(CollectorRegistry()),
                          clock=ManualClock(start=NOW.timestamp()))  # fmt: skip
    job.run_once()
    return store.url


def _run(runner: CliRunner, *args: str, code: int = 0) -> Any:
    result = runner.invoke(main, ["inspect", *args], catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result


def test_modes_are_listed_largest_first_with_the_new_one_marked(
    runner: CliRunner, grouped: str
) -> None:
    doc = json.loads(_run(runner, "failures", "--db", grouped, "--json").output)
    modes = doc["modes"]
    assert len(modes) == 4
    assert [m["size"] for m in modes] == sorted((m["size"] for m in modes), reverse=True)
    (new,) = [m for m in modes if m["new"]]
    assert new["size"] == 12 and "hallucination" in new["metrics"]
    assert new["examples"][0] == "late-11"  # newest first
    (run,) = doc["runs"]
    assert run["status"] == "grouped" and run["modes"] == 4 and run["emerging"] == 1
    text = _run(runner, "failures", "--db", grouped, "--assistant", "canary").output
    assert text.startswith("canary: grouped 2026-12-06 12:00 UTC: 162 failed turns: 4 modes")
    assert "NEW" in text and new["mode_id"] in text
    assert "inspect failure MODE_ID" in text


def test_one_mode_shows_its_turns_newest_first_with_the_reasons(
    runner: CliRunner, grouped: str
) -> None:
    modes = json.loads(_run(runner, "failures", "--db", grouped, "--json").output)["modes"]
    new = next(m for m in modes if m["new"])
    doc = json.loads(
        _run(runner, "failure", new["mode_id"], "--db", grouped, "--limit", "3", "--json").output
    )
    assert [t["event_id"] for t in doc["turns"]] == ["late-11", "late-10", "late-9"]
    assert all(t["reasons"]["hallucination"] for t in doc["turns"])
    text = _run(runner, "failure", new["mode_id"], "--db", grouped).output
    assert text.splitlines()[0] == f"{new['mode_id']} (canary)  NEW"
    assert "hallucination: " in text and "late-11" in text


def test_an_unknown_mode_and_an_unknown_assistant_exit_2(runner: CliRunner, grouped: str) -> None:
    out = _run(runner, "failure", "fm-0000000000", "--db", grouped, code=2).output
    assert "no failure mode has id 'fm-0000000000'" in out
    out = _run(runner, "failures", "--db", grouped, "--assistant", "nobody", code=2).output
    assert "unknown assistant 'nobody'" in out


def test_a_store_the_job_never_ran_on_says_so(runner: CliRunner, store: Store) -> None:
    turns, _ = planted_turns(3, 1, noise=0.0, seed=33, start=NOW, span=timedelta(hours=1))
    store_failed(store, turns, "canary")
    out = _run(runner, "failures", "--db", store.url).output
    assert "the failure-modes job has not run on this store" in out
