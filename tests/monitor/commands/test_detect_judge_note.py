"""Is it the assistant or the judge? The live turns and the judge canary are judged by the same
fake judge over HTTP (the real openai client). When the judge turns harsher mid-run the
assistant's detector alarms, and so does the canary, so ``casewatch detect`` does not blame the
assistant alone; the same regression under a quiet canary is the assistant's."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from monitor.cli import main
from monitor.config.settings import Settings
from monitor.jobs.build import build_jobs
from monitor.jobs.detection import DetectionJob
from monitor.jobs.inputs import read_job_inputs
from monitor.jobs.judge_canary import JudgeCanaryJob
from monitor.jobs.recorders import DetectionRecorder
from monitor.judging.evaluator import build_evaluator
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.schema.turn import TurnEvent
from monitor.scoring.turn import DEFAULT_CRITICAL_METRICS
from monitor.storage.store import Store
from tests.fake_judge_server import FakeJudgeServer
from tests.fixtures.databases import make_turn
from tests.fixtures.detection import config, verdict
from tests.fixtures.judge_server import ShiftingJudge, fake_judge_config

ROOT = Path(__file__).resolve().parents[3]
CANARY = ROOT / "examples" / "judge_canary.jsonl"
STABLE = ROOT / "examples" / "turns-stable.jsonl"
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
HOUR = 3600.0


def _shifting_judge() -> ShiftingJudge:
    """Severe on 3 canary answers; harsher, on 15 of the same turns."""
    answers = [json.loads(x)["turn"]["answer"] for x in CANARY.read_text().splitlines()]
    return ShiftingJudge(answers[:3], answers[3:15])


def _reference(store: Store, config_hash: str, n: int, p: float) -> None:
    """Two-day-old turns at the stable judge's severe rate, stored under the live hash."""
    rng = np.random.default_rng(3)
    at = (NOW - timedelta(days=2)).isoformat()
    items = []
    for i, bad in enumerate(rng.random(n) < p):
        turn = make_turn(f"ref-{i}", assistant="shop", timestamp=at)
        items.append((turn, verdict(turn, bool(bad), config_hash=config_hash)))
    store.save_many(items)


def _scenario(tmp_path: Path, harsher_judge: bool) -> Path:
    url = f"sqlite:///{tmp_path / 'casewatch.db'}"
    clock = ManualClock(start=NOW.timestamp())
    store = Store(url, clock=clock)
    store.migrate()
    judge = _shifting_judge()
    stable = [json.loads(x) for x in STABLE.read_text().splitlines()]
    with FakeJudgeServer() as server:
        server.responder = judge
        settings = Settings(
            judges={"llm": fake_judge_config(server)},
            judge="llm",
            judge_canary={"file": str(CANARY), "interval_seconds": HOUR},
            sampling={"budget_calls_per_hour": None, "budget_usd_per_hour": None},
            storage={"url": url, "retention_days": None},
        )
        evaluator = build_evaluator(settings, concurrency=1)
        inputs = read_job_inputs(settings)
        jobs = build_jobs(settings, store, Metrics(CollectorRegistry()), clock, inputs=inputs)
        [canary] = [j for j in jobs if isinstance(j, JudgeCanaryJob)]
        detection = DetectionJob(
            config(),
            list(DEFAULT_CRITICAL_METRICS),
            store,
            DetectionRecorder(Metrics(CollectorRegistry())),
            clock=clock,
        )
        try:
            p0 = len(judge.severe & {t["answer"] for t in stable}) / len(stable)
            _reference(store, evaluator.config_hash, 2000, p0)
            detection.run_once()
            for _ in range(4):  # the canary's baseline, and one armed run
                canary.run_once()
                clock.advance(60)
            if harsher_judge:
                judge.harsher()  # the judge moved: live verdicts and canary alike
            else:  # the assistant regressed: its answers are now the ones the judge calls severe
                stable = [
                    {**t, "answer": next(iter(judge.severe))} if i % 3 == 0 else t
                    for i, t in enumerate(stable)
                ]
            n = 0
            for _ in range(6):
                clock.advance(60)
                items = []
                for t in stable:
                    n += 1
                    at = datetime.fromtimestamp(clock.time(), tz=UTC).isoformat()
                    turn = TurnEvent.model_validate(
                        {
                            **t,
                            "event_id": f"live-{n}",
                            "timestamp": at,
                            "assistant": {**t["assistant"], "name": "shop"},
                        }
                    )
                    items.append((turn, evaluator.evaluate(turn)))
                store.save_many(items)
                detection.run_once()
                canary.run_once()
        finally:
            evaluator.close()
            for job in jobs:
                job.close()
            store.close()
    path = tmp_path / "casewatch.yaml"
    path.write_text(f"storage:\n  url: {url}\n")
    return path


def _detect(runner: CliRunner, path: Path) -> dict[str, Any]:
    result = runner.invoke(main, ["detect", "--config", str(path), "--json"])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.output)
    return doc


def test_a_harsher_judge_alarms_the_canary_too_so_the_assistant_is_not_blamed_alone(
    runner: CliRunner, tmp_path: Path
) -> None:
    path = _scenario(tmp_path, harsher_judge=True)
    doc = _detect(runner, path)
    shop = {d["signal"]: d for d in doc["detectors"] if d["assistant"] == "shop"}
    assert shop["turn_severe"]["alarm"] is True  # the assistant's detector saw the rate rise
    assert doc["judge_change"]["canary_alarms"] == ["llm"]  # ... and the canary saw the judge
    assert doc["judge_change"]["config_changed"] is False  # same configuration: a silent change
    text = runner.invoke(main, ["detect", "--config", str(path)]).output
    assert "the judge canary alarmed for llm" in text
    assert "suspect the judge before the assistant" in text


def test_the_same_regression_with_a_quiet_canary_is_the_assistants(
    runner: CliRunner, tmp_path: Path
) -> None:
    path = _scenario(tmp_path, harsher_judge=False)
    doc = _detect(runner, path)
    shop = {d["signal"]: d for d in doc["detectors"] if d["assistant"] == "shop"}
    assert shop["turn_severe"]["alarm"] is True
    assert doc["judge_change"]["canary_alarms"] == []
    assert doc["judge_change"]["canary_runs"] > 0
    text = runner.invoke(main, ["detect", "--config", str(path)]).output
    assert "the judge did not move" in text
