"""The judge canary against a fake judge over HTTP (the real openai client): a judge that
starts calling more canary turns severe is flagged within a few runs, whatever the order of the
canary file, and the alarm reaches the store, the gauge the alert reads and ``casewatch detect``;
a failing judge's run is recorded failed, never as agreement; canary turns reach the judge
redacted as live turns do; a replica that lost the job's lease saves nothing; a canary file that
cannot be used (one turn among them) stops the daemon at start, naming the line."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
import yaml
from click.testing import CliRunner
from prometheus_client import CollectorRegistry
from pydantic import ValidationError
from structlog.testing import capture_logs

from monitor.commands.detect import detect_command
from monitor.config.sampling import SamplingConfig
from monitor.config.settings import Settings
from monitor.errors import ConfigError, LeaseLost
from monitor.jobs.build import build_jobs
from monitor.jobs.inputs import JobInputs, read_job_inputs
from monitor.jobs.judge_canary import JudgeCanaryJob
from monitor.jobs.scheduler import JobScheduler
from monitor.metrics.exporter import Metrics
from monitor.redaction.config import RedactionConfig
from monitor.runtime.clock import ManualClock
from monitor.sampling.judging_redaction import JudgingRedaction
from monitor.storage import canary_runs
from monitor.storage.leases import Leases
from monitor.storage.store import Store
from monitor.storage.tables import judge_canary_runs
from monitor.stream.prepare import prepare
from tests.fake_judge_server import FakeJudgeServer, server_error
from tests.fixtures.judge_server import ShiftingJudge, fake_judge_config
from tests.rules.promql import casewatch_series

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
    jobs = build_jobs(settings, store, Metrics(registry), clock, inputs=read_job_inputs(settings))
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
    # One observation per run: 4 -> 8 severe of 24 adds 1.85 to the 2x CUSUM a run against
    # a threshold of 5.6 (one false alarm per 30 days), so the fourth run flags it.
    assert flagged_after is not None and flagged_after <= 4
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


# ------------------------------------------------------------ the order of the canary file


def _canary_lines() -> list[str]:
    return CANARY.read_text().splitlines()


def _doubling_judge() -> ShiftingJudge:
    """Severe on 6 of the 24 canary answers; harsher, on 12: its severe calls double."""
    answers = _answers()
    return ShiftingJudge(answers[:6], answers[6:12])


def _orders() -> dict[str, list[int]]:
    """The canary file's orders: severe calls first (turns the harsher judge calls severe,
    then the rest: the order that erased the alarm within every run when calls were fed one
    by one), severe calls last, and random permutations."""
    n = len(_canary_lines())
    orders = {"severe first": list(range(n)), "severe last": list(range(n))[::-1]}
    for seed in range(5):
        orders[f"permutation {seed}"] = [int(i) for i in np.random.default_rng(seed).permutation(n)]
    return orders


def _clear(store: Store) -> None:
    with store.transaction(write=True) as conn:
        conn.execute(sa.delete(judge_canary_runs))


def _run_until_alarm(
    path: Path, store: Store, *, limit: int = 8
) -> tuple[list[tuple[bool, float, int | None]], int | None, CollectorRegistry]:
    """Three baseline runs, three more of the same judge, then the judge turns harsher: every
    stored run as (alarm, statistic, severe calls), and how many harsher runs raised the
    alarm (None: not within ``limit``)."""
    judge = _doubling_judge()
    registry = CollectorRegistry()
    clock = ManualClock()
    flagged = None
    with FakeJudgeServer() as server:
        server.responder = judge
        job = _job(_settings(server, path), store, registry, clock)
        try:
            for _ in range(6):
                job.run_once()
                clock.advance(HOUR)
            judge.harsher()
            for run in range(1, limit + 1):
                job.run_once()
                clock.advance(HOUR)
                if _gauge(registry, "casewatch_judge_canary_alarm", judge="llm") == 1:
                    flagged = run
                    break
        finally:
            job.close()
    rows = canary_runs.runs_since(store, EPOCH)
    return [(r["alarm"], r["statistic"], r["severe_calls"]) for r in rows], flagged, registry


def test_a_run_concludes_the_same_whatever_the_order_of_the_canary_file(
    tmp_path: Path, store: Store
) -> None:
    lines = _canary_lines()
    results = {}
    for name, order in _orders().items():
        _clear(store)
        path = _write(tmp_path / f"{name.replace(' ', '-')}.jsonl", [lines[i] for i in order])
        rows, flagged, registry = _run_until_alarm(path, store)
        # The judge's severe calls doubled (6 -> 12 of 24): flagged within 8 runs, and the
        # alarm is what the store keeps and the gauge the alert reads shows.
        assert flagged is not None and flagged <= 8, name
        assert [r[2] for r in rows] == [6] * 6 + [12] * flagged, name
        assert rows[-1][0] is True, name
        assert _gauge(registry, "casewatch_judge_canary_alarm", judge="llm") == 1
        results[name] = (rows, flagged)
    reference = results["severe first"]
    for name, result in results.items():
        assert result == reference, name  # the same statistic after every run, in every order


def test_the_alarm_reaches_the_store_the_gauge_the_alert_reads_and_detect(
    tmp_path: Path,
) -> None:
    """Under the scheduler (on its lease), as the daemon runs it: the job's last success and
    the alarm gauge are the two series ``CasewatchJudgeChanged`` reads; ``casewatch detect``
    reads the stored alarm."""
    rules = yaml.safe_load((ROOT / "rules" / "casewatch.rules.yml").read_text())
    [rule] = [
        r for g in rules["groups"] for r in g["rules"] if r.get("alert") == "CasewatchJudgeChanged"
    ]
    assert casewatch_series(rule["expr"]) == {
        "casewatch_judge_canary_alarm",
        "casewatch_job_last_success_timestamp_seconds",
    }
    lines = _canary_lines()
    path = _write(tmp_path / "severe-first.jsonl", lines)  # the harsher judge's severe first
    url = f"sqlite:///{tmp_path / 'casewatch.db'}"
    store = Store(url)
    store.migrate()
    judge = _doubling_judge()
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    clock = ManualClock(time.time())  # detect looks at the last 6 hours of the wall clock
    scheduler = JobScheduler(store, metrics, owner="replica-a", clock=clock)
    try:
        with FakeJudgeServer() as server:
            server.responder = judge
            settings = _settings(server, path)
            inputs = read_job_inputs(settings)
            for job in build_jobs(
                settings, store, metrics, clock, inputs=inputs, lease_owner=scheduler.owner
            ):
                scheduler.add(job)
            for _ in range(3):
                assert scheduler.run_once("judge_canary") == "ok"
                clock.advance(60)
            judge.harsher()
            for _ in range(8):
                assert scheduler.run_once("judge_canary") == "ok"
                clock.advance(60)
                if _gauge(registry, "casewatch_judge_canary_alarm", judge="llm") == 1:
                    break
    finally:
        scheduler.close()
        store.close()
    assert _gauge(registry, "casewatch_judge_canary_alarm", judge="llm") == 1
    last = _gauge(registry, "casewatch_job_last_success_timestamp_seconds", job="judge_canary")
    assert last is not None and clock.time() - last < 10800  # the alert's freshness condition
    result = CliRunner().invoke(detect_command, ["--db", url, "--json"])
    assert result.exit_code == 0, result.output
    change = json.loads(result.output)["judge_change"]
    assert change["canary_alarms"] == ["llm"]


# ------------------------------------------------------------ redaction, lease, one turn

EMAIL, PHONE = "jane.roe@example.org", "+1 415 555 0132"


def _with_pii(tmp_path: Path) -> Path:
    lines = []
    for x in _canary_lines():
        doc = json.loads(x)
        doc["turn"]["query"] = f"{doc['turn']['query']} Reach me at {EMAIL} or {PHONE}."
        lines.append(json.dumps(doc))
    return _write(tmp_path / "pii.jsonl", lines)


@pytest.mark.parametrize("before_judging", [True, False])
def test_canary_turns_reach_the_judge_redacted_as_live_turns_do(
    tmp_path: Path, store: Store, before_judging: bool
) -> None:
    path = _with_pii(tmp_path)
    with FakeJudgeServer() as server:
        settings = _settings(server, path).model_copy(
            update={"redaction": RedactionConfig(before_judging=before_judging, stored_turns=True)}
        )
        job = _job(settings, store, CollectorRegistry(), ManualClock())
        try:
            runs = job.run_once()
        finally:
            job.close()
        sent = [json.dumps(r) for r in server.requests]
    assert runs["llm"].status == "ok"
    assert len(sent) == len(_canary_lines())
    if before_judging:
        assert not any(EMAIL in r or "555 0132" in r for r in sent)
        assert all("<EMAIL_" in r and "<PHONE_" in r for r in sent), sent[0]
    else:  # the stream judges raw text too with before_judging off; so does the canary
        assert all(EMAIL in r for r in sent)


def test_the_canary_redacts_by_the_chains_one_redaction(
    tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One set of turn decisions per process: ``prepare`` builds the chain's, and the canary
    (its file turns and the job) gets their redaction, not one built again from the settings."""
    built: list[object] = []
    from_config = JudgingRedaction.from_config.__func__  # type: ignore[attr-defined]

    def counted(cls: type[JudgingRedaction], config: RedactionConfig | None) -> object:
        built.append(from_config(cls, config))
        return built[-1]

    monkeypatch.setattr(JudgingRedaction, "from_config", classmethod(counted))
    with FakeJudgeServer() as server:
        settings = _settings(server, _with_pii(tmp_path)).model_copy(
            update={"redaction": RedactionConfig(before_judging=True, stored_turns=True)}
        )
        prepared = prepare(settings, ManualClock())
        jobs = build_jobs(
            settings, store, Metrics(CollectorRegistry()), ManualClock(), inputs=prepared.job_inputs
        )
    [job] = [j for j in jobs if isinstance(j, JudgeCanaryJob)]
    try:
        assert built == [prepared.decisions.redaction] and built[0] is not None
        assert job._redaction is prepared.decisions.redaction
        assert all(EMAIL not in t.event.query for t in prepared.job_inputs.canary_turns or ())
    finally:
        for j in jobs:
            j.close()


def test_a_replica_whose_lease_was_lost_saves_no_canary_run(store: Store) -> None:
    registry = CollectorRegistry()
    clock = ManualClock()
    now = datetime.fromtimestamp(clock.time(), tz=UTC)
    with FakeJudgeServer() as server:
        settings = _settings(server)
        inputs = read_job_inputs(settings)
        jobs = build_jobs(settings, store, Metrics(registry), clock, inputs=inputs, lease_owner="a")
        [job] = [j for j in jobs if isinstance(j, JudgeCanaryJob)]
        try:
            assert Leases(store).acquire("judge_canary", "b", now, HOUR)  # taken by b
            with pytest.raises(LeaseLost, match="judge_canary"):
                job.run_once()
            assert canary_runs.runs_since(store, EPOCH) == []
            assert (
                _gauge(registry, "casewatch_judge_canary_runs_total", judge="llm", outcome="ok")
                == 0
            )
            Leases(store).release("judge_canary", "b")
            assert Leases(store).acquire("judge_canary", "a", now, HOUR)
            assert job.run_once()["llm"].status == "ok"
        finally:
            job.close()
    [row] = canary_runs.runs_since(store, EPOCH)
    assert row["status"] == "ok"


def test_a_one_turn_canary_is_refused_at_start_saying_why(tmp_path: Path, store: Store) -> None:
    one = _write(tmp_path / "one.jsonl", _canary_lines()[:1])
    with FakeJudgeServer() as server:
        with pytest.raises(ConfigError, match=r"line 1: the file ends after 1 canary turn"):
            _job(_settings(server, one), store, CollectorRegistry(), ManualClock())
        with pytest.raises(ValidationError, match="min_turns must be at least 2"):
            _settings(server, one, min_turns=1)
        assert server.request_count == 0


def test_the_job_judges_the_turns_read_at_the_entrypoint_and_reads_no_file(
    tmp_path: Path, store: Store
) -> None:
    path = _write(tmp_path / "canary.jsonl", _canary_lines())
    with FakeJudgeServer() as server:
        settings = _settings(server, path)
        inputs = read_job_inputs(settings)
        path.unlink()  # gone before the jobs are built: they are given the parsed turns
        jobs = build_jobs(
            settings, store, Metrics(CollectorRegistry()), ManualClock(), inputs=inputs
        )
        [job] = [j for j in jobs if isinstance(j, JudgeCanaryJob)]
        try:
            assert job.run_once()["llm"].turns == len(_canary_lines())
        finally:
            job.close()
        with pytest.raises(ValueError, match="canary_file_turns"):
            build_jobs(
                settings, store, Metrics(CollectorRegistry()), ManualClock(), inputs=JobInputs()
            )
        assert server.request_count == len(_canary_lines())


def test_runs_that_judge_nothing_are_counted_and_logged_once(tmp_path: Path, store: Store) -> None:
    """Too few labelled turns in the store, or a budget that refuses the run's calls: nothing
    is judged, every such run is counted under its outcome, and the log says it once."""
    registry = CollectorRegistry()
    with FakeJudgeServer() as server:
        waiting = _settings(server).model_copy(
            update={
                "judge_canary": _settings(server).judge_canary.model_copy(update={"file": None})
            }
        )
        job = _job(waiting, store, registry, ManualClock())
        with capture_logs() as logs:
            try:
                assert job.run_once() == {} and job.run_once() == {}
            finally:
                job.close()
        assert [e["event"] for e in logs if "waiting" in e["event"]] == [
            "judge canary waiting for labels: nothing judged until there are enough"
        ]
        assert (
            _gauge(registry, "casewatch_judge_canary_runs_total", judge="llm", outcome="waiting")
            == 2
        )

        registry = CollectorRegistry()
        poor = _settings(server).model_copy(
            update={"sampling": SamplingConfig(budget_calls_per_hour=10, budget_usd_per_hour=None)}
        )
        job = _job(poor, store, registry, ManualClock())
        with capture_logs() as logs:
            try:
                assert job.run_once() == {} and job.run_once() == {}
            finally:
                job.close()
        assert len([e for e in logs if "budget" in e["event"]]) == 1
        assert (
            _gauge(registry, "casewatch_judge_canary_runs_total", judge="llm", outcome="budget")
            == 2
        )
        assert server.request_count == 0
