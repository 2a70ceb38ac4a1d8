"""The judge canary against a fake judge over HTTP (the real openai client): a judge that
starts calling more canary turns severe is flagged within a few runs; a failing judge's run is
recorded failed, never as agreement; a canary file that cannot be used stops the daemon at start,
naming the line."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from monitor.clock import ManualClock
from monitor.errors import ConfigError
from monitor.exporter import Metrics
from monitor.jobs.build import build_jobs
from monitor.jobs.judge_canary import JudgeCanaryJob
from monitor.settings import Settings
from monitor.storage import canary_runs
from monitor.storage.store import Store
from tests.fake_judge_server import FakeJudgeServer, server_error
from tests.fixtures.judge_server import ShiftingJudge, fake_judge_config

ROOT = Path(__file__).resolve().parents[3]
CANARY = ROOT / "examples" / "judge_canary.jsonl"
HOUR = 3600.0
EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


def _answers() -> list[str]:
    return [json.loads(x)["turn"]["answer"] for x in CANARY.read_text().splitlines()]


def _shifting_judge() -> ShiftingJudge:
    """Severe on 4 canary answers; harsher, on 8: its severe calls double."""
    answers = [json.loads(x)["turn"]["answer"] for x in CANARY.read_text().splitlines()]
    return ShiftingJudge(answers[:4], answers[4:8])


def _settings(server: FakeJudgeServer, canary: Path = CANARY, **canary_cfg: Any) -> Settings:
    return Settings(
        judges={"llm": fake_judge_config(server)},
        judge="llm",
        judge_canary={"file": str(canary), "interval_seconds": HOUR, **canary_cfg},
        sampling={"budget_calls_per_hour": None, "budget_usd_per_hour": None},
        drift={"enabled": False},
        detection={"enabled": False},
        quality_estimate={"enabled": False},
        storage={"url": "sqlite:///unused.db", "retention_days": None},
    )


def _job(
    settings: Settings, store: Store, registry: CollectorRegistry, clock: ManualClock
) -> JudgeCanaryJob:
    jobs = build_jobs(settings, store, Metrics(registry), clock)
    [job] = [j for j in jobs if isinstance(j, JudgeCanaryJob)]
    return job


def _gauge(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_a_judge_whose_severe_calls_double_is_flagged_within_a_few_runs(store: Store) -> None:
    judge = _shifting_judge()
    registry = CollectorRegistry()
    clock = ManualClock()
    with FakeJudgeServer() as server:
        server.responder = judge
        job = _job(_settings(server), store, registry, clock)
        try:
            for _ in range(5):  # three baseline runs, then two more of the same judge
                runs = job.run_once()
                assert runs["llm"].status == "ok"
                clock.advance(HOUR)
            assert _gauge(registry, "casewatch_judge_canary_alarm", judge="llm") == 0
            assert _gauge(registry, "casewatch_judge_canary_score_shift", judge="llm") == 0
            agreement = _gauge(registry, "casewatch_judge_canary_agreement", judge="llm")
            assert agreement is not None and 0 < agreement < 1
            judge.harsher()  # same model name, same configuration: only its scoring moved
            flagged_after = None
            for run in range(1, 6):
                job.run_once()
                clock.advance(HOUR)
                if _gauge(registry, "casewatch_judge_canary_alarm", judge="llm") == 1:
                    flagged_after = run
                    break
        finally:
            job.close()
    assert flagged_after is not None and flagged_after <= 3
    shift = _gauge(registry, "casewatch_judge_canary_score_shift", judge="llm")
    assert shift is not None and shift < 0  # more severe turns: a lower mean score
    assert _gauge(registry, "casewatch_judge_canary_runs_total", judge="llm", outcome="ok") == (
        5 + flagged_after
    )
    stored = canary_runs.runs_since(store, EPOCH)
    assert [r["alarm"] for r in stored][-1] is True
    assert [r["armed"] for r in stored][:4] == [False, False, False, True]


def test_a_run_whose_judge_fails_is_recorded_failed_never_as_agreement(store: Store) -> None:
    registry = CollectorRegistry()
    with FakeJudgeServer() as server:
        server.responder = lambda _request: server_error()
        job = _job(_settings(server), store, registry, ManualClock())
        try:
            runs = job.run_once()
        finally:
            job.close()
    assert runs["llm"].status == "failed"
    assert runs["llm"].failure_reason == "server_error"
    assert _gauge(registry, "casewatch_judge_canary_runs_total", judge="llm", outcome="failed") == 1
    assert _gauge(registry, "casewatch_judge_canary_agreement", judge="llm") is None
    [row] = canary_runs.runs_since(store, EPOCH)
    assert row["status"] == "failed" and row["agreement"] is None
    assert row["failure_reason"] == "server_error"


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(x + "\n" for x in lines))
    return path


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda lines: [*lines[:1], "{not json", *lines[1:]], "line 2: not JSON"),
        (
            lambda lines: [
                *lines[:2],
                json.dumps({**json.loads(lines[2]), "labels": {"tone": "severe"}}),
                *lines[3:],
            ],
            "line 3: unknown metric 'tone'",
        ),
        (
            lambda lines: [
                json.dumps({**json.loads(lines[0]), "turn": {"event_id": "x"}}),
                *lines[1:],
            ],
            "line 1: turn.",
        ),
        (lambda lines: lines[:5], "line 5: the file ends after 5 canary turn(s)"),
    ],
)
def test_a_canary_file_that_cannot_be_used_stops_the_daemon_at_start_naming_the_line(
    tmp_path: Path, store: Store, edit: Any, message: str
) -> None:
    lines = CANARY.read_text().splitlines()
    path = _write(tmp_path / "canary.jsonl", edit(lines))
    with FakeJudgeServer() as server:
        with pytest.raises(ConfigError, match=r"judge_canary\.file") as info:
            _job(_settings(server, path), store, CollectorRegistry(), ManualClock())
        assert server.request_count == 0  # refused before any judge call
    assert message in str(info.value)
    assert str(path) in str(info.value)
