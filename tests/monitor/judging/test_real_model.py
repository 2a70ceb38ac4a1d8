"""The judges against a real OpenAI-compatible server: llama-cpp-python on SmolLM2-135M.

What the real server does differently from a hosted API, and what casewatch does about it
(docs/real-model.md): it refuses ``json_schema`` with a 500 quoting its validation error (the
judge negotiates JSON mode with the schema inline, which the server turns into a grammar),
it cuts replies at ``max_tokens`` with ``finish_reason: length`` (``truncated``), and it
refuses connections until its model is loaded (retried). The fake judge server answers the
same way (``tests/fake_judge_replies.py``); the first tests here check it still does.

The 135M model's judgments are poor; these tests check the plumbing, never a score.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest

from monitor.judging.chat_endpoint import CallStats, ChatEndpoint, content_of
from monitor.judging.judge import FAILURE_REASONS
from monitor.judging.openai_judge import OpenAIJudge
from monitor.judging.schema import SCHEMA_NAME
from monitor.schema.turn import METRICS, Judgment, TurnEvent
from tests.fake_judge_replies import llama_cpp_rejects_json_schema, render_completion, truncated
from tests.fixtures.model_server import real_judge_config
from tests.model_server import MODEL_ALIAS, RealModelServer

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def example_turns(n: int) -> list[TurnEvent]:
    lines = (EXAMPLES / "turns.jsonl").read_text().splitlines()[:n]
    return [TurnEvent.model_validate_json(line) for line in lines]


def post(server: RealModelServer, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """One raw chat-completions request: the server's own answer, unparsed by casewatch."""
    response = httpx2.post(
        f"{server.base_url}/chat/completions", json={"model": MODEL_ALIAS, **body}, timeout=600
    )
    doc: dict[str, Any] = response.json()
    return response.status_code, doc


def assert_judged_or_failed(judgment: Judgment) -> None:
    """Every turn ends one of two ways, never lost: all eight metrics, or a bounded reason."""
    if judgment.status == "ok":
        assert judgment.scores is not None
        assert set(judgment.scores.model_dump()) == set(METRICS)
    else:
        assert judgment.failure_reason in FAILURE_REASONS
        assert judgment.failure_detail


SHORT = [{"role": "user", "content": "Say hello."}]


def test_the_fake_rejects_json_schema_as_the_real_server_does(
    real_model: RealModelServer,
) -> None:
    schema_format = {
        "type": "json_schema",
        "json_schema": {"name": SCHEMA_NAME, "strict": True, "schema": {"type": "object"}},
    }
    status, body = post(
        real_model, {"messages": SHORT, "max_tokens": 4, "response_format": schema_format}
    )
    fake = llama_cpp_rejects_json_schema()({"response_format": schema_format})
    assert fake.body is not None
    assert (status, set(body)) == (fake.status, set(fake.body)) == (500, {"error"})
    assert body["error"]["type"] == fake.body["error"]["type"] == "internal_server_error"
    for quoted in ("response_format", "json_schema", "json_object"):
        assert quoted in body["error"]["message"] and quoted in fake.body["error"]["message"]


def test_the_fake_truncates_and_counts_usage_as_the_real_server_does(
    real_model: RealModelServer,
) -> None:
    status, real = post(real_model, {"messages": SHORT, "max_tokens": 2, "temperature": 0})
    assert status == 200
    fake = render_completion({"messages": SHORT}, truncated("Hi"), 1)
    assert real["choices"][0]["finish_reason"] == fake["choices"][0]["finish_reason"] == "length"
    assert set(real["usage"]) == set(fake["usage"])
    assert real["usage"]["completion_tokens"] == 2
    assert set(real["choices"][0]) == set(fake["choices"][0])


def test_auto_settles_on_json_mode_with_the_schema_and_a_cut_reply_ends_truncated(
    real_model: RealModelServer,
) -> None:
    """The real server refuses json_schema (one refused request, once per judge), accepts JSON
    mode with the schema inline and holds the reply to it by a grammar; cut at max_tokens, the
    turn ends judge_failed with ``truncated``, never lost. (A whole judgment by this model is
    longer than 400 tokens: minutes per turn on a busy 2-core machine, so the suite asks for
    16.)"""
    judge = OpenAIJudge(
        "smollm2", real_judge_config(real_model, max_output_tokens=16, output_retries=0)
    )
    try:
        judgment = judge.judge(example_turns(1)[0])
        assert judge.response_mode == "json_object_schema"
    finally:
        judge.close()
    assert_judged_or_failed(judgment)
    assert (judgment.status, judgment.failure_reason) == ("judge_failed", "truncated")
    assert "max_tokens" in (judgment.failure_detail or "")
    assert judgment.attempts == 2  # the refused json_schema, then JSON mode with the schema
    assert judgment.input_tokens > 1000 and judgment.output_tokens == 16
    raw = judgment.raw_output or ""
    assert raw.replace(" ", "").startswith('{"hallucination":{'), raw  # the grammar at work


def test_connections_refused_while_the_model_loads_are_retried(tmp_path: Path) -> None:
    """llama-cpp-python loads the model before it listens: a call made during the load sees
    refused connections, retries them with backoff, and is answered once the server is up."""
    server = RealModelServer(tmp_path / "server.log").launch()
    try:
        config = real_judge_config(
            server, transport_retries=20, backoff_initial_seconds=0.2, backoff_max_seconds=3.0
        )
        endpoint = ChatEndpoint("smollm2", config)
        call = CallStats()
        try:
            reply = endpoint.with_retries(
                lambda: endpoint.send(SHORT, call, max_tokens=2, temperature=0), call
            )
        finally:
            endpoint.close()
    finally:
        server.stop()
    assert content_of(reply)
    assert call.transport_retries >= 1 and call.requests == call.transport_retries + 1
