"""The OpenAI-compatible case judge against a fake judge over HTTP (the real openai client):
the turn judge's contract at case level (strict schema, a bad reply asked again with what was
wrong, fail-closed judge_failed with the reason, prompt, raw output, tokens and latency kept),
and the case panel's decision table (agreement, the arbiter on a disputed case, a failed
primary)."""

from __future__ import annotations

import json
from typing import Any

from monitor.judging.case_judge import OpenAICaseJudge
from monitor.judging.case_panel import PANEL_INSUFFICIENT, PRIMARY_FAILED, CasePanel
from monitor.judging.case_prompt import CASE_PROMPT_VERSION
from monitor.runtime.clock import ManualClock
from tests.fake_judge_server import FakeJudgeServer, Reply, content, malformed, server_error
from tests.fixtures.judge_server import fake_judge_config
from tests.support.cases import case_document, case_of, case_reply_text, turn

CASE = case_of(turn("c", 0), turn("c", 1, query="It still drops.", answer="Update to 2.4.2."))


def _judge(server: FakeJudgeServer, name: str = "llm", **cfg: Any) -> OpenAICaseJudge:
    return OpenAICaseJudge(
        name, fake_judge_config(server, **cfg), max_prompt_chars=60_000, clock=ManualClock()
    )


def test_a_valid_reply_is_a_scored_judgment_with_its_audit_trail() -> None:
    with FakeJudgeServer() as server:
        server.script([content(case_reply_text(0.7, "partial"))])
        judge = _judge(server)
        try:
            judgment, cut = judge.judge_case(CASE)
        finally:
            judge.close()
        [request] = server.requests
    assert judgment.ok and cut == 0
    assert judgment.scores is not None and judgment.scores.resolution_outcome == "partial"
    assert judgment.scores.score_map()["consistency"] == 0.7
    assert judgment.prompt_version == CASE_PROMPT_VERSION and len(judgment.prompt_hash) == 64
    assert json.loads(judgment.raw_output or "") == case_document(0.7, "partial")
    assert judgment.attempts == 1 and judgment.input_tokens > 0
    assert request["response_format"]["type"] == "json_schema"
    assert request["response_format"]["json_schema"]["strict"] is True


def test_an_invalid_reply_is_asked_again_with_what_was_wrong() -> None:
    wrong = case_document()
    wrong["resolution_outcome"] = "solved"  # not one of the four outcomes
    with FakeJudgeServer() as server:
        server.script([content(json.dumps(wrong)), content(case_reply_text())])
        judge = _judge(server)
        try:
            judgment, _ = judge.judge_case(CASE)
        finally:
            judge.close()
        retry = server.requests[1]["messages"]
    assert judgment.ok and judgment.attempts == 2
    assert retry[-2] == {"role": "assistant", "content": json.dumps(wrong)}
    assert "resolution_outcome" in retry[-1]["content"] and "not valid" in retry[-1]["content"]


def test_a_judge_that_never_answers_validly_fails_closed_with_the_reason() -> None:
    with FakeJudgeServer() as server:
        server.responder = lambda _: malformed()
        judge = _judge(server, output_retries=1)
        try:
            judgment, _ = judge.judge_case(CASE)
        finally:
            judge.close()
        server.responder = lambda _: server_error()
        judge = _judge(server, transport_retries=1)
        try:
            unreachable, _ = judge.judge_case(CASE)
        finally:
            judge.close()
    assert (judgment.status, judgment.failure_reason, judgment.attempts) == (
        "judge_failed",
        "invalid_output",
        2,
    )
    assert judgment.scores is None and judgment.raw_output is not None
    assert (unreachable.status, unreachable.failure_reason) == ("judge_failed", "server_error")


def _by_model(scores: dict[str, tuple[float, str] | None]) -> Any:
    def responder(request: dict[str, Any]) -> Reply:
        answer = scores[request["model"]]
        return server_error() if answer is None else content(case_reply_text(*answer))

    return responder


def _panel(server: FakeJudgeServer, arbiter: bool) -> CasePanel:
    judges = [_judge(server, name, model=name) for name in ("a", "b", "arb")]
    return CasePanel(judges[:2], judges[2] if arbiter else None)


def test_the_panel_asks_the_arbiter_only_when_the_primaries_disagree() -> None:
    with FakeJudgeServer() as server:
        panel = _panel(server, arbiter=True)
        try:
            server.responder = _by_model(
                {"a": (0.9, "resolved"), "b": (0.95, "resolved"), "arb": (0.1, "unresolved")}
            )
            agreed = panel.judge(CASE)
            asked_before = len(server.requests)
            server.responder = _by_model(
                {"a": (0.9, "resolved"), "b": (0.2, "unresolved"), "arb": (0.3, "unresolved")}
            )
            disputed = panel.judge(CASE)
            server.responder = _by_model(
                {"a": (0.9, "resolved"), "b": None, "arb": (0.7, "resolved")}
            )
            one_failed = panel.judge(CASE)
            server.responder = _by_model({"a": None, "b": None, "arb": (0.7, "resolved")})
            both_failed = panel.judge(CASE)
        finally:
            panel.close()
    assert asked_before == 2 and not agreed.arbitrated
    assert agreed.status == "ok" and agreed.scores["resolution"] == 0.925
    assert disputed.arbitrated and disputed.trigger == "case_band"
    assert disputed.scores["resolution"] == 0.3 and disputed.outcome == "unresolved"  # median
    assert (one_failed.status, one_failed.trigger) == ("ok", PRIMARY_FAILED)
    assert one_failed.scores["resolution"] == 0.8  # the primary and the arbiter
    assert (both_failed.status, both_failed.failure_reason) == ("judge_failed", PANEL_INSUFFICIENT)
    assert len(both_failed.judgments) == 2  # every judgment kept for the audit
