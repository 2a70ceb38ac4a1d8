"""The baseline-tier job end to end: assistants served by the test over HTTP, the pairwise
judge on the fake judge server with logprobs, matches in SQL, metrics in a fresh registry."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from monitor.config.baseline import BaselineConfig
from monitor.config.settings import load_settings
from monitor.errors import CasewatchError, ConfigError
from monitor.jobs.baseline_tiers import JOB_NAME, BaselineTiersJob, build_baseline_job
from monitor.jobs.build import build_jobs
from monitor.jobs.inputs import read_job_inputs
from monitor.jobs.scheduler import JobScheduler
from monitor.judging.pairwise_judge import OpenAIPairwiseJudge, PairwiseOptions
from monitor.judging.probes import Probe, load_probes
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.stats.elo import MatchResult, replay
from monitor.storage.matches import run_matches
from monitor.storage.store import Store
from tests.fake_judge_server import FakeJudgeServer, content, pairwise
from tests.fixtures.databases import make_turn, make_verdict
from tests.fixtures.judge_server import fake_judge_config

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
PROBES = load_probes(EXAMPLES / "probes.jsonl")[:4]
QUALITY = {"high": 3.0, "medium": 2.0, "low": 0.0}
HARD = {"A": math.log(0.83), "Tie": math.log(0.16), "B": math.log(1e-6)}
TIE = {"Tie": math.log(0.9), "A": math.log(0.05), "B": math.log(0.05)}


def quality(answer: str | dict[str, Any]) -> float:
    text = answer["text"] if isinstance(answer, dict) else answer  # answers with own contexts
    for probe in PROBES:
        for tier, q in QUALITY.items():
            if text == probe.baselines.answer(tier):  # type: ignore[arg-type]
                return q
    return 1.0


def judge_by_quality(pair: dict[str, Any]) -> dict[str, float]:
    a, b = quality(pair["answer_a"]), quality(pair["answer_b"])
    if a == b:
        return TIE
    return HARD if a > b else {"B": HARD["A"], "Tie": HARD["Tie"], "A": HARD["B"]}


def answer_for(query: str, tier: str) -> str:
    probe = next(p for p in PROBES if p.query == query)
    return probe.baselines.answer(tier)  # type: ignore[arg-type]


class TemplateAssistant:
    """A JSON API assistant: POST {"question": ..., "id": ...} -> {"data": {"answer": ...}}.
    Answers every probe with its Low baseline; 500 for ``fail_id``."""

    def __init__(self, fail_id: str | None = None) -> None:
        self.bodies: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.bodies.append(body)
                if body["id"] == fail_id:
                    status, reply = 500, {"error": "boom"}
                else:
                    status, reply = 200, {"data": {"answer": answer_for(body["question"], "low")}}
                payload = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/ask"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def assistant_chat() -> Iterator[FakeJudgeServer]:
    """An OpenAI-compatible assistant answering every probe with its High baseline."""
    with FakeJudgeServer() as server:
        server.responder = lambda req: content(answer_for(req["messages"][-1]["content"], "high"))
        yield server


@pytest.fixture
def template_assistant() -> Iterator[TemplateAssistant]:
    server = TemplateAssistant(fail_id=PROBES[3].id)
    yield server
    server.close()


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def baseline_config(chat: FakeJudgeServer, template: TemplateAssistant) -> BaselineConfig:
    return BaselineConfig.model_validate(
        {
            "enabled": True,
            "probes": str(EXAMPLES / "probes.jsonl"),
            "judge": "pairwise",
            "concurrency": 3,
            "assistants": [
                {
                    "name": "bot-chat",
                    "endpoint": {"kind": "openai", "url": chat.base_url, "model": "bot"},
                },
                {
                    "name": "bot-json",
                    "endpoint": {
                        "kind": "template",
                        "url": template.url,
                        "body": {"question": "{{query}}", "id": "{{probe_id}}", "n": 1},
                        "answer_path": "$.data.answer",
                    },
                },
            ],
        }
    )


def make_job(
    config: BaselineConfig, fake_judge: FakeJudgeServer, store: Store, metrics: Metrics
) -> BaselineTiersJob:
    judge = OpenAIPairwiseJudge(
        "pairwise", fake_judge_config(fake_judge), PairwiseOptions(), clock=ManualClock()
    )
    return BaselineTiersJob(config, PROBES, judge, store, metrics, clock=ManualClock())


def test_job_judges_each_assistant_against_each_tier_and_exports(
    fake_judge: FakeJudgeServer,
    assistant_chat: FakeJudgeServer,
    template_assistant: TemplateAssistant,
    store: Store,
) -> None:
    fake_judge.responder = pairwise(judge_by_quality)
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    job = make_job(baseline_config(assistant_chat, template_assistant), fake_judge, store, metrics)
    scheduler = JobScheduler(store, metrics, clock=ManualClock())
    scheduler.add(job)
    assert scheduler.run_once(JOB_NAME) == "ok"
    job.close()

    # bot-chat answers like High: ties High, beats Medium and Low.
    expected_rate = {"high": 0.5, "medium": 1.0, "low": 1.0}
    for tier, rate in expected_rate.items():
        assert sample(registry, "casewatch_baseline_win_rate", assistant="bot-chat", tier=tier) == (
            rate
        )
    outcomes = "casewatch_baseline_outcomes_total"
    assert sample(registry, outcomes, assistant="bot-chat", tier="high", outcome="tie") == 4
    assert sample(registry, outcomes, assistant="bot-chat", tier="low", outcome="win") == 4
    assert sample(registry, outcomes, assistant="bot-chat", tier="low", outcome="loss") == 0
    confidence = "casewatch_pairwise_confidence_total"
    assert sample(registry, confidence, assistant="bot-chat", kind="hard") == 4 * 3 * 2
    assert sample(registry, confidence, assistant="bot-chat", kind="unknown") == 0
    gap = "casewatch_pairwise_position_disagreement"
    assert sample(registry, gap, assistant="bot-chat") == 0.0
    scores = {
        t: {f"{p.id}@endpoint": expected_rate[t] for p in PROBES} for t in ("low", "medium", "high")
    }
    elo = replay(
        ["bot-chat", "tier:high", "tier:medium", "tier:low"],
        [MatchResult("bot-chat", f"tier:{t}", scores[t]) for t in ("low", "medium", "high")],
    )["bot-chat"]
    assert sample(registry, "casewatch_elo_rating", assistant="bot-chat") == pytest.approx(elo)
    assert elo > 1500

    # bot-json answers like Low (and fails one probe): loses to High and Medium, ties Low.
    assert sample(registry, outcomes, assistant="bot-json", tier="high", outcome="loss") == 3
    assert sample(registry, "casewatch_baseline_win_rate", assistant="bot-json", tier="low") == 0.5
    assert sample(registry, "casewatch_elo_rating", assistant="bot-json") < 1500  # type: ignore[operator]
    assert template_assistant.bodies[0] == {"question": PROBES[0].query, "id": PROBES[0].id, "n": 1}

    # One row per answer and tier, with both orders' raw outputs.
    run_id = run_matches_any(store)
    rows = run_matches(store, run_id)
    assert len(rows) == (4 + 3) * 3
    chat_high = next(r for r in rows if r["assistant"] == "bot-chat" and r["opponent"] == "high")
    assert chat_high["status"] == "ok" and chat_high["outcome"] == "tie"
    assert chat_high["forward"]["analysis"].startswith("A: fully correct")
    assert chat_high["forward"]["top_logprobs"]["Tie"] == pytest.approx(math.log(0.9))
    assert chat_high["swapped"]["label"] == "Tie"
    assert {r["source"] for r in rows} == {"endpoint"}


def run_matches_any(store: Store) -> str:
    import sqlalchemy as sa

    from monitor.storage.tables import matches

    with store.transaction(write=False) as conn:
        return str(conn.execute(sa.select(matches.c.run_id).limit(1)).scalar_one())


def test_stored_turns_matching_a_probe_are_judged_too(
    fake_judge: FakeJudgeServer, store: Store
) -> None:
    fake_judge.responder = pairwise(judge_by_quality)
    probe: Probe = PROBES[1]
    turn = make_turn("evt-probe", assistant="bot-live", query=f"  {probe.query.upper()} ")
    turn = turn.model_copy(update={"answer": probe.baselines.medium})
    store.save(turn, make_verdict(turn))
    store.save(make_turn("evt-other", assistant="bot-live"), make_verdict(make_turn("evt-other")))
    config = BaselineConfig.model_validate(
        {
            "enabled": True,
            "probes": str(EXAMPLES / "probes.jsonl"),
            "judge": "pairwise",
            "assistants": [{"name": "bot-live", "from_turns": True, "turns_max_age_hours": 1e6}],
        }
    )
    registry = CollectorRegistry()
    job = make_job(config, fake_judge, store, Metrics(registry))
    job.run()
    (summary,) = job.last_run
    assert summary.answers == 1
    assert {t: s.win_rate for t, s in summary.tiers.items()} == {
        "high": 0.0,
        "medium": 0.5,
        "low": 1.0,
    }
    rows = run_matches(store, run_matches_any(store))
    assert {(r["source"], r["event_id"], r["probe_id"]) for r in rows} == {
        ("turns", "evt-probe", probe.id)
    }
    # The live turn's own contexts went to the judge with its answer.
    first_stage = fake_judge.requests[0]["messages"][1]["content"]
    assert "Reinstall the driver." in first_stage


def test_an_assistant_that_answers_nothing_fails_the_run(
    fake_judge: FakeJudgeServer, store: Store
) -> None:
    config = BaselineConfig.model_validate(
        {
            "enabled": True,
            "probes": str(EXAMPLES / "probes.jsonl"),
            "judge": "pairwise",
            "assistants": [
                {
                    "name": "bot-down",
                    "endpoint": {"kind": "template", "url": "http://127.0.0.1:9/x", "body": {}},
                }
            ],
        }
    )
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    job = make_job(config, fake_judge, store, metrics)
    scheduler = JobScheduler(store, metrics, clock=ManualClock())
    scheduler.add(job)
    assert scheduler.run_once(JOB_NAME) == "failed"
    assert fake_judge.request_count == 0
    (summary,) = job.last_run
    assert summary.fetch_failures == {"connection": 4}


def test_a_misconfigured_assistant_fails_its_answers_not_the_other_assistants(
    fake_judge: FakeJudgeServer,
    assistant_chat: FakeJudgeServer,
    template_assistant: TemplateAssistant,
    store: Store,
) -> None:
    # A body template naming an unknown placeholder raises ConfigError when a probe is asked.
    fake_judge.responder = pairwise(judge_by_quality)
    config = baseline_config(assistant_chat, template_assistant)
    broken = config.assistants[1].model_copy(
        update={
            "name": "bot-broken",
            "endpoint": config.assistants[1].endpoint.model_copy(  # type: ignore[union-attr]
                update={"body": {"question": "{{no_such_field}}"}}
            ),
        }
    )
    config = config.model_copy(update={"assistants": [broken, config.assistants[0]]})
    job = make_job(config, fake_judge, store, Metrics(CollectorRegistry()))
    with pytest.raises(CasewatchError, match="bot-broken"):
        job.run()  # counted failed: one assistant answered nothing
    broken_summary, chat_summary = job.last_run
    assert broken_summary.fetch_failures == {"config": len(PROBES)}
    assert chat_summary.endpoint_answers == len(PROBES)  # still asked and judged
    assert sum(s.outcomes.total() for s in chat_summary.tiers.values()) == 3 * len(PROBES)
    job.close()


def test_build_jobs_registers_the_job_from_the_baseline_section(
    store: Store, tmp_path: Path
) -> None:
    settings = load_settings(
        baseline={
            "enabled": True,
            "probes": str(EXAMPLES / "probes.jsonl"),
            "assistants": [{"name": "bot-live", "from_turns": True}],
        },
        storage={"url": store.url, "retention_days": None},
    )
    inputs = read_job_inputs(settings)
    jobs = build_jobs(settings, store, Metrics(CollectorRegistry()), ManualClock(), inputs=inputs)
    (job,) = [j for j in jobs if j.name == JOB_NAME]  # other jobs may be registered too
    assert isinstance(job, BaselineTiersJob) and job.interval_seconds == 3600
    bad = tmp_path / "probes.jsonl"
    broken = settings.model_copy(
        update={"baseline": settings.baseline.model_copy(update={"probes": bad})}
    )
    with pytest.raises(ConfigError, match=r"baseline\.probes: cannot read the probe set"):
        read_job_inputs(broken)
    bad.write_text('{"id": "x"}\n')
    with pytest.raises(ConfigError, match=r"baseline\.probes: .*probes.jsonl:1"):
        read_job_inputs(broken)
    # Built from the probes read at the entrypoint: the bad file configured is not read again.
    built = build_baseline_job(
        broken.baseline,
        PROBES,
        broken.judge_config(broken.baseline.judge),
        store,
        Metrics(CollectorRegistry()),
        ManualClock(),
    )
    assert built.interval_seconds == 3600
    built.close()


def test_failed_judgments_are_stored_counted_and_clear_the_gauges(
    fake_judge: FakeJudgeServer, assistant_chat: FakeJudgeServer, store: Store
) -> None:
    config = BaselineConfig.model_validate(
        {
            "enabled": True,
            "probes": str(EXAMPLES / "probes.jsonl"),
            "judge": "pairwise",
            "assistants": [
                {
                    "name": "bot-chat",
                    "endpoint": {"kind": "openai", "url": assistant_chat.base_url, "model": "b"},
                }
            ],
        }
    )
    registry = CollectorRegistry()
    job = make_job(config, fake_judge, store, Metrics(registry))
    fake_judge.responder = pairwise(judge_by_quality)
    job.run()
    rate = {"assistant": "bot-chat", "tier": "low"}
    assert registry.get_sample_value("casewatch_baseline_win_rate", rate) == 1.0

    fake_judge.responder = pairwise(lambda _pair: "Perhaps")  # never a label
    job.run()
    job.close()
    assert registry.get_sample_value("casewatch_baseline_win_rate", rate) is None
    assert registry.get_sample_value("casewatch_elo_rating", {"assistant": "bot-chat"}) is None
    failed = {"judge": "pairwise", "reason": "invalid_output"}
    assert registry.get_sample_value("casewatch_judge_failed_total", failed) == 4 * 3
    outcomes = {"assistant": "bot-chat", "tier": "low", "outcome": "win"}
    assert registry.get_sample_value("casewatch_baseline_outcomes_total", outcomes) == 4
    (summary,) = job.last_run
    assert summary.tiers["low"].outcomes["failed"] == 4
    import sqlalchemy as sa

    from monitor.storage.tables import matches

    with store.transaction(write=False) as conn:
        rows = conn.execute(
            sa.select(matches.c.status, matches.c.failure_reason, matches.c.forward).where(
                matches.c.status == "judge_failed"
            )
        ).all()
    assert len(rows) == 12 and {r.failure_reason for r in rows} == {"invalid_output"}
    assert all(r.forward["decision"] == "Perhaps" and r.forward["score_a"] is None for r in rows)


class CountingBudget:
    """Admits ``admit`` reservations, then refuses; records what was settled."""

    def __init__(self, admit: int) -> None:
        self.admit = admit
        self.settled: list[tuple[int, int, float]] = []

    def reserve(self, calls: int) -> str | None:
        if self.admit <= 0:
            return "budget_calls"
        self.admit -= 1
        return None

    def settle(self, reserved_calls: int, calls: int, usd: float) -> None:
        self.settled.append((reserved_calls, calls, usd))


def test_judge_calls_are_charged_to_the_hourly_budget(
    fake_judge: FakeJudgeServer, assistant_chat: FakeJudgeServer, store: Store
) -> None:
    fake_judge.responder = pairwise(judge_by_quality)
    config = BaselineConfig.model_validate(
        {
            "enabled": True,
            "probes": str(EXAMPLES / "probes.jsonl"),
            "judge": "pairwise",
            "concurrency": 1,
            "assistants": [
                {
                    "name": "bot-chat",
                    "endpoint": {"kind": "openai", "url": assistant_chat.base_url, "model": "b"},
                }
            ],
        }
    )
    budget = CountingBudget(admit=5)
    judge = OpenAIPairwiseJudge(
        "pairwise", fake_judge_config(fake_judge), PairwiseOptions(), clock=ManualClock()
    )
    job = BaselineTiersJob(
        config, PROBES, judge, store, Metrics(CollectorRegistry()), budget=budget
    )
    job.run()
    job.close()
    (summary,) = job.last_run
    assert summary.budget_refused == 4 * 3 - 5
    assert sum(sum(t.outcomes.values()) for t in summary.tiers.values()) == 5
    assert [(r, c) for r, c, _ in budget.settled] == [(4, 4)] * 5  # 2 stages x 2 orders
    assert len(run_matches(store, run_matches_any(store))) == 5
    assert fake_judge.request_count == 5 * 4
