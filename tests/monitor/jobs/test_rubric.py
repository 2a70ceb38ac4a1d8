"""The rubric job on SQLite and PostgreSQL with the fake judge server: what it grades, stores,
exports and charges, and what each failure does."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from prometheus_client import CollectorRegistry

from monitor.config.rubric import RubricConfig
from monitor.config.sampling import SamplingConfig
from monitor.config.settings import load_settings
from monitor.errors import ConfigError
from monitor.jobs.build import build_jobs
from monitor.jobs.inputs import JobInputs, read_job_inputs
from monitor.jobs.rubric import RubricJob
from monitor.judging.rubric_set import parse_rubric_set
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.sampling.budget import HourlyBudget
from monitor.sampling.sampler import Sampler
from monitor.storage.audit import counts, stored_verdicts
from monitor.storage.engine import normalize_url
from monitor.storage.retention import purge_older_than
from monitor.storage.rubric_gradings import RubricGradings
from monitor.storage.store import Store
from monitor.storage.tables import turns
from tests.fake_judge_server import (
    FakeJudgeServer,
    Reply,
    http_error,
    keyword_grader,
    rubric_data_of,
    server_error,
)
from tests.fixtures.databases import make_turn, make_verdict
from tests.fixtures.judge_server import fake_judge_config

RUBRICS = parse_rubric_set(
    """\
- id: vpn-drops
  query: VPN drops
  reviewed: true
  questions:
    - Which driver must be reinstalled?
    - Which KB article applies?
    - Which MTU is recommended?
    - Is a reboot needed?
- id: printer
  query: Printer offline
  questions: ["Which port does the printer use?"]
""",
    "rubrics.yaml",
)
KEYWORDS = {
    "Which driver must be reinstalled?": "VPN driver",
    "Which KB article applies?": "KB-1",
    "Which port does the printer use?": "9100",
}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start=time.time())


@pytest.fixture
def make_job(
    store: Store, fake_judge: FakeJudgeServer, clock: ManualClock, registry: CollectorRegistry
) -> Iterator[Any]:
    jobs: list[RubricJob] = []
    fake_judge.responder = keyword_grader(KEYWORDS)
    metrics = Metrics(registry)

    def make(budget: HourlyBudget | None = None, **config: Any) -> RubricJob:
        cfg = RubricConfig(**{"enabled": True, "rubric_file": "unused.yaml", **config})
        job = RubricJob(
            cfg,
            "grader",
            fake_judge_config(fake_judge, transport_retries=0),
            store,
            metrics,
            budget
            or Sampler(
                SamplingConfig(budget_calls_per_hour=None, budget_usd_per_hour=None), clock
            ).budget,
            clock=clock,
            rubrics=RUBRICS,
        )
        jobs.append(job)
        return job

    yield make
    for job in jobs:
        job.close()


def _save(store: Store, event_id: str, **fields: Any) -> None:
    turn = make_turn(event_id, **fields)
    store.save(turn, make_verdict(turn))


def _sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def test_matching_turns_are_graded_stored_and_exported(
    store: Store, make_job: Any, registry: CollectorRegistry, fake_judge: FakeJudgeServer
) -> None:
    _save(store, "by-subject")  # case subject "VPN drops" = the entry's query
    _save(
        store,
        "by-label",
        case={"subject": "x", "description": "y"},
        labels={"rubric_id": "printer"},
        answer="The printer listens on port 9100.",
    )
    _save(store, "unmatched", case={"subject": "Disk full", "description": "y"})
    job = make_job()
    summary = job.run_once()
    assert (summary.graded, summary.failed, summary.unmatched) == (2, 0, 1)
    assert fake_judge.request_count == 4 + 1  # one passage each: 4 and 1 questions

    [row] = RubricGradings(store).for_event("by-subject")
    assert (row["entry_id"], row["status"], row["coverage"], row["reviewed"]) == (
        "vpn-drops",
        "ok",
        0.5,
        True,
    )
    assert [(g["grade"], g["answer"], g["path"]) for g in row["grades"]] == [
        (5, "VPN driver", "json"),
        (5, "KB-1", "json"),
        (0, "", "json"),
        (0, "", "json"),
    ]
    assert row["path_counts"] == {"json": 4, "number": 0, "unanswerable": 0, "unparseable": 0}
    assert row["requests"] == 4 and row["input_tokens"] > 0
    [printer] = RubricGradings(store).for_event("by-label")
    assert (printer["entry_id"], printer["coverage"], printer["reviewed"]) == (
        "printer",
        1.0,
        False,
    )

    helpdesk = {"assistant": "helpdesk"}
    assert _sample(registry, "casewatch_rubric_coverage_count", **helpdesk) == 2
    assert _sample(registry, "casewatch_rubric_coverage_sum", **helpdesk) == 1.5
    assert _sample(registry, "casewatch_rubric_coverage_bucket", le="0.5", **helpdesk) == 1
    assert _sample(registry, "casewatch_rubric_graded_total", outcome="ok", **helpdesk) == 2
    assert _sample(registry, "casewatch_rubric_replies_total", path="json") == 5
    assert _sample(registry, "casewatch_rubric_replies_total", path="unparseable") == 0

    # Graded turns are never graded again (the cursor, and across restarts the table).
    assert job.run_once().graded == 0
    assert make_job().run_once().graded == 0
    assert fake_judge.request_count == 5


def test_turns_outside_the_lookback_window_are_left_alone(
    store: Store, make_job: Any, clock: ManualClock
) -> None:
    _save(store, "old")
    clock.advance(3 * 3600)
    assert make_job(lookback_hours=2).run_once().graded == 0
    assert make_job(lookback_hours=4).run_once().graded == 1


def test_at_most_max_turns_per_run(store: Store, make_job: Any) -> None:
    for i in range(5):
        _save(store, f"t{i}")
    job = make_job(max_turns_per_run=2)
    assert job.run_once().graded == 2
    assert job.run_once().graded == 2
    assert job.run_once().graded == 1


def test_the_hourly_budget_is_charged_and_refusals_wait(
    store: Store, make_job: Any, clock: ManualClock, registry: CollectorRegistry
) -> None:
    _save(store, "t0")
    _save(store, "t1")
    budget = Sampler(
        SamplingConfig(budget_calls_per_hour=6, budget_usd_per_hour=None), clock
    ).budget
    job = make_job(budget=budget)
    summary = job.run_once()
    assert (summary.graded, summary.budget_refused) == (1, 1)  # 4 calls, then 4 > 2 left
    assert budget.levels()["calls"] == pytest.approx(2)
    assert (
        _sample(registry, "casewatch_rubric_graded_total", assistant="helpdesk", outcome="budget")
        == 1
    )
    assert RubricGradings(store).for_event("t1") == []
    clock.advance(3600)  # refilled: the refused turn comes first
    assert job.run_once().graded == 1
    assert len(RubricGradings(store).for_event("t1")) == 1


def test_an_endpoint_failure_stops_the_run_and_the_turn_is_retried(
    store: Store, make_job: Any, fake_judge: FakeJudgeServer, registry: CollectorRegistry
) -> None:
    _save(store, "t0")
    _save(store, "t1")
    fake_judge.responder = lambda _req: server_error()
    job = make_job()
    summary = job.run_once()
    assert (summary.graded, summary.failed) == (0, 1)
    assert RubricGradings(store).for_event("t0") == []
    assert (
        _sample(registry, "casewatch_rubric_graded_total", assistant="helpdesk", outcome="failed")
        == 1
    )
    fake_judge.responder = keyword_grader(KEYWORDS)
    assert job.run_once().graded == 2


def test_a_failed_grading_settles_the_budget_it_reserved(
    store: Store, make_job: Any, fake_judge: FakeJudgeServer, clock: ManualClock
) -> None:
    # Four questions, one passage: four requests reserved. The endpoint fails the first ones;
    # the requests never sent come back to the hourly budget, the ones sent stay charged.
    _save(store, "t0")
    fake_judge.responder = lambda _req: server_error()
    budget = Sampler(SamplingConfig(budget_calls_per_hour=10), clock).budget
    summary = make_job(budget=budget, concurrency=1).run_once()
    assert summary.failed == 1
    # How many were sent before the rest were cancelled depends on thread timing (a busy
    # machine may send all four): whatever was sent is charged, whatever was not comes back.
    sent = fake_judge.request_count
    assert 1 <= sent <= 4
    assert budget.levels()["calls"] == pytest.approx(10 - sent)


def test_a_turn_the_endpoint_refuses_is_stored_failed_and_skipped(
    store: Store, make_job: Any, fake_judge: FakeJudgeServer
) -> None:
    _save(store, "t0", answer="poison")
    _save(store, "t1")
    grader = keyword_grader(KEYWORDS)

    def respond(request: dict[str, Any]) -> Reply:
        if (rubric_data_of(request) or {}).get("context") == "poison":
            return http_error(400, "context too long")
        return grader(request)

    fake_judge.responder = respond
    summary = make_job().run_once()
    assert (summary.graded, summary.failed) == (1, 1)
    [row] = RubricGradings(store).for_event("t0")
    assert (row["status"], row["failure_reason"], row["grades"], row["coverage"]) == (
        "failed",
        "bad_request",
        None,
        None,
    )


def test_build_jobs_adds_the_rubric_job_when_enabled(
    store: Store, tmp_path: Any, fake_judge: FakeJudgeServer, clock: ManualClock
) -> None:
    rubrics = tmp_path / "rubrics.yaml"
    good = "- id: a\n  query: q\n  reviewed: true\n  questions: [x]\n"
    rubrics.write_text(good)
    judges = {"grader": fake_judge_config(fake_judge)}
    settings = load_settings(
        None, judges=judges, rubric={"enabled": True, "rubric_file": rubrics, "judge": "grader"}
    )
    metrics = Metrics(CollectorRegistry())
    inputs = read_job_inputs(settings)
    rubrics.unlink()  # read once, at the entrypoint: building the job reads no file
    jobs = build_jobs(settings, store, metrics, clock, inputs=inputs)
    by_name = {j.name: j for j in jobs}
    assert by_name["rubric"].interval_seconds == 300
    off = load_settings(None, judges=judges)
    assert "rubric" not in [
        j.name for j in build_jobs(off, store, metrics, clock, inputs=read_job_inputs(off))
    ]

    with pytest.raises(ConfigError, match=r"rubric\.rubric_file: .*cannot read the file"):
        read_job_inputs(settings)
    rubrics.write_text("- id: a\n")  # a bad file fails at startup, naming the line
    with pytest.raises(ConfigError, match="line 1: query: Field required"):
        read_job_inputs(settings)
    with pytest.raises(ValueError, match=r"rubric\.rubric_file was not read"):
        build_jobs(settings, store, metrics, clock, inputs=JobInputs())
    rubrics.write_text(good)
    heuristic = load_settings(None, rubric={"enabled": True, "rubric_file": rubrics})
    with pytest.raises(ConfigError, match="must be an 'openai' judge"):
        build_jobs(heuristic, store, metrics, clock, inputs=read_job_inputs(heuristic))


def test_retention_deletes_gradings_with_their_turn(
    store: Store, make_job: Any, clock: ManualClock
) -> None:
    _save(store, "t0")
    assert make_job().run_once().graded == 1
    assert len(RubricGradings(store).for_event("t0")) == 1
    purge_older_than(store, datetime.now(UTC) + timedelta(days=1))
    assert counts(store)["turns"] == 0
    assert RubricGradings(store).for_event("t0") == []


def test_a_turn_committed_late_with_an_earlier_stamp_is_still_graded(
    store: Store, make_job: Any
) -> None:
    # Two replicas: one stamps a turn, the other's later-stamped turns become visible first.
    _save(store, "seen-1", case={"subject": "Disk full", "description": "d"})
    _save(store, "seen-2", case={"subject": "Disk full", "description": "d"})
    job = make_job()
    assert job.run_once().unmatched == 2
    late = make_turn("late")
    store.save(late, make_verdict(late))
    first = min(r["stored_at"] for r in stored_verdicts(store))
    engine = sa.create_engine(normalize_url(store.url))
    with engine.begin() as conn:
        conn.execute(sa.update(turns).where(turns.c.event_id == "late").values(stored_at=first))
    engine.dispose()
    summary = job.run_once()
    assert summary.graded == 1
    assert len(RubricGradings(store).for_event("late")) == 1
