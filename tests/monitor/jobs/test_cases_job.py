"""The case job on SQLite and PostgreSQL: a conversation gets one current case verdict once it
goes quiet (or at once when a turn ends it), a resumed one a new version with the earlier kept;
a failing judge stores judge_failed with the reason and is retried at the next run; turns
arriving out of order are judged in conversation order; a case too long for the judge's
context is cut with a note; the budget, a lost lease and a racing replica never give a version
two verdicts, and lose none."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from monitor.config.settings import Settings
from monitor.errors import LeaseLost
from monitor.jobs.build import build_jobs
from monitor.jobs.cases import CaseJob
from monitor.jobs.inputs import read_job_inputs
from monitor.judging.case_judge import OpenAICaseJudge
from monitor.judging.heuristic.case_judge import HeuristicCaseJudge
from monitor.judging.prompt import unfence
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.sampling.budget import HourlyBudget
from monitor.storage import case_queries
from monitor.storage.leases import Leases
from monitor.storage.store import Store
from tests.fake_judge_server import FakeJudgeServer, Reply, content, server_error
from tests.fixtures.judge_server import fake_judge_config
from tests.support.cases import case_job, case_reply_text, store_turn, turn

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC).timestamp()
IDLE = 600.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start=T0)


@pytest.fixture
def timed_store(store: Store, clock: ManualClock) -> Any:
    """The migrated test database, its turns stamped by the test's clock."""
    s = Store(store.url, clock=clock)
    yield s
    s.close()


def _versions(store: Store, conversation: str) -> list[tuple[str, int, str]]:
    return [
        (r["assistant_name"], r["version"], r["status"])
        for r in case_queries.case_history(store, conversation)
    ]


def _sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def test_a_quiet_case_is_judged_once_and_a_resumed_one_again_as_a_new_version(
    timed_store: Store, clock: ManualClock
) -> None:
    registry = CollectorRegistry()
    job = case_job(timed_store, [HeuristicCaseJudge()], clock, registry=registry)
    for i in range(3):
        store_turn(timed_store, turn("conv-a", i))
    for i in range(2):
        store_turn(timed_store, turn("conv-b", i))
    assert job.run_once() == []  # not quiet yet
    clock.advance(IDLE + 1)
    stored = job.run_once()
    assert sorted((v.conversation_id, v.version, v.turns) for v in stored) == [
        ("conv-a", 1, 3),
        ("conv-b", 1, 2),
    ]
    assert all(v.status == "ok" and v.close_reason == "idle" for v in stored)
    assert job.run_once() == []  # judged: nothing new
    clock.advance(5)
    store_turn(timed_store, turn("conv-a", 3, query="It still drops with 0x80070005."))
    clock.advance(IDLE - 10)
    assert job.run_once() == []  # resumed, quiet for less than idle_seconds
    clock.advance(20)
    [resumed] = job.run_once()
    assert (resumed.conversation_id, resumed.version, resumed.turns) == ("conv-a", 2, 4)
    assert _versions(timed_store, "conv-a") == [("helpdesk", 1, "ok"), ("helpdesk", 2, "ok")]
    history = case_queries.case_history(timed_store, "conv-a")
    assert history[-1]["judgments"][0]["kind"] == "heuristic"
    assert history[-1]["judgments"][0]["raw_output"]
    judged = sum(
        _sample(registry, "casewatch_cases_judged_total", assistant="helpdesk", band=b)
        for b in ("severe", "moderate", "minor", "none", "judge_failed")
    )
    assert judged == 3
    assert _sample(registry, "casewatch_cases_pending") == 0


def test_a_turn_that_ends_the_case_closes_it_without_waiting(
    timed_store: Store, clock: ManualClock
) -> None:
    job = case_job(timed_store, [HeuristicCaseJudge()], clock)
    store_turn(timed_store, turn("conv-e", 0))
    store_turn(timed_store, turn("conv-e", 1, ends_case=True))
    store_turn(timed_store, turn("conv-open", 0))
    [verdict] = job.run_once()
    assert (verdict.conversation_id, verdict.close_reason, verdict.turns) == ("conv-e", "ended", 2)
    clock.advance(1)
    store_turn(timed_store, turn("conv-e", 2))  # the customer came back: a resume
    assert job.run_once() == []
    clock.advance(IDLE + 1)
    names = sorted((v.conversation_id, v.version, v.close_reason) for v in job.run_once())
    assert names == [("conv-e", 2, "idle"), ("conv-open", 1, "idle")]


def test_two_assistants_answering_one_conversation_id_are_two_cases(
    timed_store: Store, clock: ManualClock
) -> None:
    job = case_job(timed_store, [HeuristicCaseJudge()], clock)
    store_turn(timed_store, turn("conv-ab", 0, assistant="stable"))
    store_turn(timed_store, turn("conv-ab", 0, assistant="canary"))
    clock.advance(IDLE + 1)
    assert len(job.run_once()) == 2
    assert _versions(timed_store, "conv-ab") == [("canary", 1, "ok"), ("stable", 1, "ok")]


def test_a_failing_judge_stores_judge_failed_and_is_retried_until_max_failures(
    timed_store: Store, clock: ManualClock
) -> None:
    registry = CollectorRegistry()
    with FakeJudgeServer() as server:
        cfg = fake_judge_config(server, transport_retries=0, output_retries=0)
        judge = OpenAICaseJudge("llm", cfg, max_prompt_chars=60_000, clock=clock)
        job = case_job(timed_store, [judge], clock, registry=registry, max_failures=2)
        try:
            store_turn(timed_store, turn("conv-f", 0))
            clock.advance(IDLE + 1)
            server.script([server_error()])
            [failed] = job.run_once()
            assert (failed.status, failed.failure_reason, failed.version) == (
                "judge_failed",
                "server_error",
                1,
            )
            server.responder = lambda _: content(case_reply_text(0.9))
            [retried] = job.run_once()  # retried at the next run, as version 2
            assert (retried.status, retried.version, retried.failures_in_row) == ("ok", 2, 0)

            store_turn(timed_store, turn("conv-g", 0))
            clock.advance(IDLE + 1)
            server.responder = lambda _: server_error()
            assert [v.failures_in_row for v in job.run_once()] == [1]
            assert [v.failures_in_row for v in job.run_once()] == [2]
            assert job.run_once() == []  # gave up until a new turn arrives
        finally:
            job.close()
    assert _versions(timed_store, "conv-f") == [
        ("helpdesk", 1, "judge_failed"),
        ("helpdesk", 2, "ok"),
    ]
    assert _sample(registry, "casewatch_case_judge_failed_total", reason="server_error") == 3
    assert _sample(registry, "casewatch_cases_skipped_total", reason="gave_up") == 1
    assert (
        _sample(registry, "casewatch_judge_failed_total", judge="llm", reason="server_error") == 3
    )


def _turn_queries(request: dict[str, Any]) -> list[str]:
    user = next(m["content"] for m in request["messages"] if m["role"] == "user")
    return [t["query"] for t in unfence(user)["turns"]]


def test_turns_arriving_out_of_order_are_judged_in_conversation_order(
    timed_store: Store, clock: ManualClock
) -> None:
    with FakeJudgeServer() as server:
        server.responder = lambda _: content(case_reply_text())
        judge = OpenAICaseJudge("llm", fake_judge_config(server), max_prompt_chars=60_000)
        job = case_job(timed_store, [judge], clock)
        try:
            for i in (2, 0, 1):
                store_turn(timed_store, turn("conv-o", i, query=f"question {i}"))
                clock.advance(1)
            clock.advance(IDLE)
            [verdict] = job.run_once()
            [request] = server.requests
        finally:
            job.close()
    assert verdict.turns == 3
    assert _turn_queries(request) == ["question 0", "question 1", "question 2"]


def test_a_case_longer_than_the_judges_context_is_cut_oldest_first_with_a_note(
    timed_store: Store, clock: ManualClock
) -> None:
    long_answer = "Reinstall the 2.4.1 driver and reconnect. " * 30
    with FakeJudgeServer() as server:
        server.responder = lambda _: content(case_reply_text())
        judge = OpenAICaseJudge("llm", fake_judge_config(server), max_prompt_chars=4_000)
        job = case_job(timed_store, [judge], clock)
        try:
            for i in range(12):
                store_turn(timed_store, turn("conv-long", i, query=f"q{i}", answer=long_answer))
            clock.advance(IDLE + 1)
            [verdict] = job.run_once()
            [request] = server.requests
        finally:
            job.close()
    shown = _turn_queries(request)
    assert shown[-1] == "q11" and len(shown) < 12
    assert verdict.turns == 12 and verdict.turns_cut == 12 - len(shown)
    user = next(m["content"] for m in request["messages"] if m["role"] == "user")
    assert f"the oldest {verdict.turns_cut} turn(s)" in unfence(user)["note"]
    stored = case_queries.case_history(timed_store, "conv-long")
    assert stored[0]["turns_cut"] == verdict.turns_cut


def test_the_budget_refusing_stops_the_run_and_the_rest_wait(
    timed_store: Store, clock: ManualClock
) -> None:
    registry = CollectorRegistry()
    budget = HourlyBudget(1, None, 0.0, clock)
    job = case_job(timed_store, [HeuristicCaseJudge()], clock, budget=budget, registry=registry)
    for conversation in ("conv-1", "conv-2"):
        store_turn(timed_store, turn(conversation, 0))
    clock.advance(IDLE + 1)
    assert len(job.run_once()) == 1
    assert _sample(registry, "casewatch_cases_skipped_total", reason="budget") == 1
    assert _sample(registry, "casewatch_cases_pending") == 1
    assert budget.state()["calls"].reserved == 0  # nothing stranded
    clock.advance(3600)  # the bucket refilled
    assert len(job.run_once()) == 1
    assert _sample(registry, "casewatch_cases_pending") == 0


def test_a_replica_that_lost_the_lease_saves_nothing(
    timed_store: Store, clock: ManualClock
) -> None:
    registry = CollectorRegistry()
    job = case_job(
        timed_store, [HeuristicCaseJudge()], clock, lease_owner="replica-a", registry=registry
    )
    store_turn(timed_store, turn("conv-l", 0))
    clock.advance(IDLE + 1)
    now = datetime.fromtimestamp(clock.time(), tz=UTC)
    assert Leases(timed_store).acquire("cases", "replica-b", now, 120)
    with pytest.raises(LeaseLost):
        job.run_once()
    assert _versions(timed_store, "conv-l") == []
    assert _sample(registry, "casewatch_cases_skipped_total", reason="lease_lost") == 1
    clock.advance(121)  # b's lease lapsed: a takes it and writes the case once
    assert Leases(timed_store).acquire("cases", "replica-a", now + timedelta(seconds=121), 120)
    assert [v.version for v in job.run_once()] == [1]


def test_two_replicas_judging_the_same_cases_at_once_write_each_version_once(
    timed_store: Store, clock: ManualClock
) -> None:
    """Both replicas find the same cases due (as when a lease lapsed under a slow run): the
    unique constraint lets one verdict per version through, the other run counts it."""
    both_asking = threading.Barrier(2, timeout=30)
    asked: list[int] = []

    def responder(request: dict[str, Any]) -> Reply:
        asked.append(1)
        if len(asked) <= 2:  # the first case: hold each replica until both are judging it
            both_asking.wait()
        return content(case_reply_text())

    registries = [CollectorRegistry(), CollectorRegistry()]
    conversations = [f"conv-r{i}" for i in range(4)]
    for conversation in conversations:
        store_turn(timed_store, turn(conversation, 0))
    clock.advance(IDLE + 1)
    with FakeJudgeServer() as server:
        server.responder = responder
        jobs: list[CaseJob] = [
            case_job(
                timed_store,
                [OpenAICaseJudge("llm", fake_judge_config(server), max_prompt_chars=60_000)],
                clock,
                registry=registry,
            )
            for registry in registries
        ]
        results: list[list[Any]] = [[], []]
        threads = [
            threading.Thread(target=lambda i=i: results[i].extend(jobs[i].run_once()))
            for i in range(2)
        ]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
        finally:
            for job in jobs:
                job.close()
    stored = [(v.conversation_id, v.version) for r in results for v in r]
    assert sorted(stored) == [(c, 1) for c in conversations]  # each once, none lost
    for conversation in conversations:
        assert _versions(timed_store, conversation) == [("helpdesk", 1, "ok")]
    duplicates = sum(
        _sample(r, "casewatch_cases_skipped_total", reason="duplicate") for r in registries
    )
    assert duplicates >= 1  # the first case was judged by both; one write was refused
    judged = sum(
        _sample(r, "casewatch_cases_judged_total", assistant="helpdesk", band=b)
        for r in registries
        for b in ("severe", "moderate", "minor", "none", "judge_failed")
    )
    assert judged == len(conversations)  # exported once per stored verdict


def test_the_daemon_builds_the_job_from_the_settings(store: Store, clock: ManualClock) -> None:
    settings = Settings(
        storage={"url": store.url, "retention_days": None},
        cases={"idle_seconds": 60, "lookback_seconds": 3600},
    )
    metrics = Metrics(CollectorRegistry())
    jobs = build_jobs(settings, store, metrics, clock, inputs=read_job_inputs(settings))
    try:
        [job] = [j for j in jobs if j.name == "cases"]
        assert job.interval_seconds == settings.cases.interval_seconds
        off = Settings(storage={"url": store.url}, cases={"enabled": False})
        jobs += build_jobs(off, store, metrics, clock, inputs=read_job_inputs(off))
        assert [j.name for j in jobs].count("cases") == 1
    finally:
        for j in jobs:
            j.close()
