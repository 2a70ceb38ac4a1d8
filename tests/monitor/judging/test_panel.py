"""The judge panel against the fake OpenAI-compatible server: real OpenAIJudges over HTTP.

Three judges share one fake endpoint and are told apart by the request's ``model``. A turn is
scripted to make the primaries disagree by a marker in its query, read back from the fenced
case data of the request, so the test knows exactly which turns need the arbiter.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from monitor.config.settings import Settings, load_settings
from monitor.errors import ConfigError
from monitor.judging import arbitration
from monitor.judging.arbitration import PanelOutcome
from monitor.judging.config_hash import judge_config_hash
from monitor.judging.evaluator import build_evaluator
from monitor.judging.panel import PANEL_INSUFFICIENT, JudgePanel
from monitor.schema.turn import METRICS, TurnEvent, Verdict
from tests.fake_judge_server import FakeJudgeServer, Reply, case_data_of, scores, server_error
from tests.fixtures.judge_server import fake_judge_config

A, B, ARB = "judge-a", "judge-b", "judge-arbiter"
DISAGREE = "[disagree]"

# Per-metric scripted scores. On a disputed turn the primaries split on hallucination
# (none vs severe) and the arbiter sides with B's band, so the median takes a different judge
# per metric: hallucination from the arbiter, every other metric from B.
SCORES_A = {m: 0.9 for m in METRICS}
SCORES_B_AGREE = {m: 0.92 for m in METRICS}
SCORES_B_DISPUTE = {**SCORES_B_AGREE, "hallucination": 0.1}
SCORES_ARB = {**{m: 0.95 for m in METRICS}, "hallucination": 0.25}


def make_turn(i: int, query: str) -> TurnEvent:
    return TurnEvent.model_validate(
        {
            "event_id": f"evt-{i}",
            "conversation_id": f"conv-{i}",
            "turn_index": 0,
            "timestamp": datetime(2026, 11, 2, 9, 0, tzinfo=UTC),
            "assistant": {"name": "helpdesk", "version": "1.0", "model": "rag-model"},
            "case": {"subject": "VPN drops", "description": "Client disconnects every hour."},
            "query": query,
            "contexts": [{"id": "kb-1", "text": "Set the rekey interval to 8h."}],
            "answer": "Raise the rekey interval to 8 hours in the client profile.",
        }
    )


def query_of(request: dict[str, Any]) -> str:
    data = case_data_of(request)
    assert data is not None, "judge request without fenced case data"
    return str(data["query"])


def scripted(
    *, b: Callable[[dict[str, Any]], Reply] | None = None, arbiter: Reply | None = None
) -> Callable[[dict[str, Any]], Reply]:
    def respond(request: dict[str, Any]) -> Reply:
        disputed = DISAGREE in query_of(request)
        if request["model"] == A:
            return scores(SCORES_A)
        if request["model"] == B:
            if b is not None:
                return b(request)
            return scores(SCORES_B_DISPUTE if disputed else SCORES_B_AGREE)
        return arbiter or scores(SCORES_ARB)

    return respond


def panel_settings(server: FakeJudgeServer, *, arbiter: bool = True, **panel: Any) -> Settings:
    cfg = {"transport_retries": 0, "output_retries": 0, "price_input_per_mtok": 1.0}
    return load_settings(
        judges={n: fake_judge_config(server, model=n, **cfg) for n in (A, B, ARB)},
        panel={"primaries": [A, B], "arbiter": ARB if arbiter else None, **panel},
    )


@pytest.fixture
def outcomes() -> list[PanelOutcome]:
    return []


@pytest.fixture
def make_panel(
    fake_judge: FakeJudgeServer, outcomes: list[PanelOutcome]
) -> Iterator[Callable[..., JudgePanel]]:
    panels: list[JudgePanel] = []

    def make(**kwargs: Any) -> JudgePanel:
        panel = build_evaluator(
            panel_settings(fake_judge, **kwargs), concurrency=4, on_panel_result=outcomes.append
        )
        panels.append(panel)
        return panel

    yield make
    for panel in panels:
        panel.close()


def models_called(server: FakeJudgeServer, model: str) -> list[str]:
    return [query_of(r) for r in server.requests if r["model"] == model]


def by_role(verdict: Verdict) -> dict[str, list[str]]:
    roles: dict[str, list[str]] = {}
    for j in verdict.judgments:
        roles.setdefault(j.role, []).append(j.judge)
    return roles


# ------------------------------------------------------------------ the arbitration rule


def test_arbiter_is_called_exactly_on_disputed_turns_and_the_median_holds(
    fake_judge: FakeJudgeServer,
    make_panel: Callable[..., JudgePanel],
    outcomes: list[PanelOutcome],
) -> None:
    fake_judge.responder = scripted()
    panel = make_panel()
    disputed = {2, 5, 7}
    turns = [make_turn(i, f"q{i} {DISAGREE if i in disputed else ''}") for i in range(10)]
    # Many callers at once, as in the daemon: the panel must be safe to share.
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        verdicts = {v.event_id: v for v in pool.map(panel.evaluate, turns)}

    assert sorted(models_called(fake_judge, ARB)) == sorted(turns[i].query for i in disputed)
    assert len(models_called(fake_judge, A)) == len(models_called(fake_judge, B)) == 10
    expected_median = {**{m: 0.92 for m in METRICS}, "hallucination": 0.25}
    for i, turn in enumerate(turns):
        v = verdicts[turn.event_id]
        assert v.status == "ok" and v.judge_config_hash == panel.config_hash
        if i in disputed:
            assert v.arbitrated and v.arbitration_trigger == "band:hallucination"
            assert v.metric_scores == expected_median
            assert by_role(v) == {"primary": [A, B], "arbiter": [ARB]}
        else:
            assert not v.arbitrated and v.arbitration_trigger is None
            assert v.metric_scores == pytest.approx({m: 0.91 for m in METRICS})
            assert by_role(v) == {"primary": [A, B]}

    assert len(outcomes) == 10
    arbitrated = [o for o in outcomes if o.arbitrated]
    assert len(arbitrated) == 3
    assert {o.sided_with for o in arbitrated} == {"primary_b"}
    assert all(o.disagreement_metrics == ("hallucination",) for o in arbitrated)
    assert all(o.cost_by_role["arbiter"] > 0 for o in arbitrated)
    assert all(o.cost_by_role["arbiter"] == 0 for o in outcomes if not o.arbitrated)
    assert all(o.cost_by_role["primary"] > 0 and o.assistant == "helpdesk" for o in outcomes)


def test_critical_band_rule_does_not_arbitrate_non_critical_splits(
    fake_judge: FakeJudgeServer, make_panel: Callable[..., JudgePanel]
) -> None:
    split = {**SCORES_B_AGREE, "answer_type_fit": 0.1}
    fake_judge.responder = scripted(b=lambda _req: scores(split))
    verdict = make_panel(disagreement="critical_band").evaluate(make_turn(1, "q"))
    assert models_called(fake_judge, ARB) == []
    assert not verdict.arbitrated and verdict.arbitration_trigger is None
    assert verdict.metric_scores["answer_type_fit"] == pytest.approx(0.5)


def test_primaries_run_concurrently(
    fake_judge: FakeJudgeServer, make_panel: Callable[..., JudgePanel]
) -> None:
    # Each primary's request waits in the server until the other primary's request for the
    # same turn has arrived: only concurrent primaries get past the barrier.
    barrier = threading.Barrier(2, timeout=1.5)
    met: list[str] = []

    def rendezvous(request: dict[str, Any]) -> Reply:
        if request["model"] in (A, B):
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                return server_error()
            met.append(request["model"])
        return scripted()(request)

    fake_judge.responder = rendezvous
    panel = make_panel()
    for i in range(3):
        verdict = panel.evaluate(make_turn(i, f"q{i}"))
        assert [j.ok for j in verdict.judgments] == [True, True]
    assert sorted(met) == [A, A, A, B, B, B]


# ------------------------------------------------------------------ failing judges


def test_failing_primary_brings_in_the_arbiter_and_the_two_answers_are_averaged(
    fake_judge: FakeJudgeServer,
    make_panel: Callable[..., JudgePanel],
    outcomes: list[PanelOutcome],
) -> None:
    fake_judge.responder = scripted(b=lambda _req: server_error())
    verdict = make_panel().evaluate(make_turn(1, "q1"))
    assert verdict.status == "ok"
    assert verdict.arbitrated and verdict.arbitration_trigger == arbitration.PRIMARY_FAILED
    assert verdict.metric_scores == arbitration.combine_agree(SCORES_A, SCORES_ARB)
    failed = [j for j in verdict.judgments if not j.ok]
    assert [(j.judge, j.role, j.failure_reason) for j in failed] == [(B, "primary", "server_error")]
    assert len(models_called(fake_judge, ARB)) == 1
    assert outcomes[0].disagreed and outcomes[0].sided_with is None


def test_failing_primary_and_arbiter_fail_the_turn_keeping_every_judgment(
    fake_judge: FakeJudgeServer, make_panel: Callable[..., JudgePanel]
) -> None:
    fake_judge.responder = scripted(b=lambda _req: server_error(), arbiter=server_error(503))
    verdict = make_panel().evaluate(make_turn(1, "q1"))
    assert verdict.status == "judge_failed" and verdict.failure_reason == PANEL_INSUFFICIENT
    assert verdict.s_final is None and verdict.metric_scores == {}
    assert by_role(verdict) == {"primary": [A, B], "arbiter": [ARB]}
    assert [j.ok for j in verdict.judgments] == [True, False, False]


def test_both_primaries_failing_do_not_pay_for_the_arbiter(
    fake_judge: FakeJudgeServer, make_panel: Callable[..., JudgePanel]
) -> None:
    fake_judge.responder = lambda _req: server_error()
    verdict = make_panel().evaluate(make_turn(1, "q1"))
    assert verdict.failure_reason == PANEL_INSUFFICIENT and not verdict.arbitrated
    assert models_called(fake_judge, ARB) == []
    assert len(verdict.judgments) == 2


def test_disputed_turn_with_a_failing_arbiter_keeps_the_primaries_mean(
    fake_judge: FakeJudgeServer, make_panel: Callable[..., JudgePanel]
) -> None:
    fake_judge.responder = scripted(arbiter=server_error())
    verdict = make_panel().evaluate(make_turn(1, f"q {DISAGREE}"))
    assert verdict.status == "ok" and verdict.arbitrated
    assert verdict.metric_scores == arbitration.combine_agree(SCORES_A, SCORES_B_DISPUTE)


def test_panel_without_arbiter_records_the_disagreement_and_averages(
    fake_judge: FakeJudgeServer,
    make_panel: Callable[..., JudgePanel],
    outcomes: list[PanelOutcome],
) -> None:
    fake_judge.responder = scripted()
    verdict = make_panel(arbiter=False).evaluate(make_turn(1, f"q {DISAGREE}"))
    assert not verdict.arbitrated and verdict.arbitration_trigger == "band:hallucination"
    assert verdict.metric_scores == arbitration.combine_agree(SCORES_A, SCORES_B_DISPUTE)
    assert models_called(fake_judge, ARB) == []
    assert outcomes[0].disagreed and not outcomes[0].arbitrated


def test_single_primary_panel_is_a_single_judge(fake_judge: FakeJudgeServer) -> None:
    fake_judge.responder = scripted()
    settings = load_settings(
        judges={A: fake_judge_config(fake_judge, model=A)}, panel={"primaries": [A]}
    )
    panel = build_evaluator(settings, concurrency=1)
    try:
        verdict = panel.evaluate(make_turn(1, "q1"))
    finally:
        panel.close()
    assert verdict.metric_scores == SCORES_A
    assert [(j.judge, j.role) for j in verdict.judgments] == [(A, "single")]
    assert not verdict.arbitrated and len(fake_judge.requests) == 1


def test_build_evaluator_returns_the_panel(fake_judge: FakeJudgeServer) -> None:
    evaluator = build_evaluator(panel_settings(fake_judge), concurrency=1)
    try:
        assert isinstance(evaluator, JudgePanel)
    finally:
        evaluator.close()


# ------------------------------------------------------------------ configuration


@pytest.mark.parametrize(
    ("panel", "message"),
    [
        ({"primaries": [A, A], "arbiter": ARB}, "two different judges"),
        ({"primaries": [A], "arbiter": ARB}, "needs two primaries"),
        ({"primaries": [A, B], "arbiter": A}, "must differ from the primaries"),
    ],
)
def test_panel_configuration_errors(
    fake_judge: FakeJudgeServer, panel: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(
            judges={n: fake_judge_config(fake_judge, model=n) for n in (A, B, ARB)}, panel=panel
        )


def test_panel_config_is_part_of_the_judge_config_hash(fake_judge: FakeJudgeServer) -> None:
    hashes = {
        judge_config_hash(panel_settings(fake_judge)),
        judge_config_hash(panel_settings(fake_judge, arbiter=False)),
        judge_config_hash(panel_settings(fake_judge, disagreement="critical_band")),
    }
    assert len(hashes) == 3
