"""The baseline job's assistant client over the judges' HTTP boundary (ChatEndpoint), against
the fake OpenAI-compatible server: what it sends and how each failure is reported."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from monitor.config.baseline import AssistantEndpointConfig
from monitor.errors import ConfigError
from monitor.jobs.assistant_client import AssistantClient, AssistantError
from monitor.judging.pairwise_prompt import PairwiseQuestion
from monitor.schema.turn import Case
from tests.fake_judge_server import FakeJudgeServer, auth_error, content, disconnect, server_error

QUESTION = PairwiseQuestion(
    query="Why does the VPN drop?", case=Case(subject="VPN drops", description="every hour")
)


@pytest.fixture
def server() -> Iterator[FakeJudgeServer]:
    with FakeJudgeServer() as fake:
        fake.responder = lambda _req: content("Reinstall the VPN driver.")
        yield fake


def _template(server: FakeJudgeServer, **fields: Any) -> AssistantEndpointConfig:
    return AssistantEndpointConfig.model_validate(
        {
            "kind": "template",
            "url": f"{server.base_url}/chat/completions",
            "body": {"model": "bot", "messages": [{"role": "user", "content": "{{query}}"}]},
            "answer_path": "$.choices[0].message.content",
            **fields,
        }
    )


def _chat(server: FakeJudgeServer, **fields: Any) -> AssistantEndpointConfig:
    return AssistantEndpointConfig.model_validate(
        {"kind": "openai", "url": server.base_url, "model": "bot", **fields}
    )


def _answer(config: AssistantEndpointConfig) -> str:
    client = AssistantClient(config, name="bot")
    try:
        return client.answer("p1", QUESTION)
    finally:
        client.close()


def test_a_template_endpoint_gets_the_rendered_body_the_headers_and_the_token(
    server: FakeJudgeServer, tmp_path: Path
) -> None:
    key = tmp_path / "token"
    key.write_text("s3cret-token\n")
    config = _template(server, api_key_file=str(key), headers={"X-Tenant": "acme"})
    assert _answer(config) == "Reinstall the VPN driver."
    [request] = server.requests
    assert request["messages"] == [{"role": "user", "content": "Why does the VPN drop?"}]
    [headers] = [{k.lower(): v for k, v in h.items()} for h in server.request_headers]
    assert headers["authorization"] == "Bearer s3cret-token"
    assert headers["x-tenant"] == "acme"


def test_without_a_token_no_authorization_header_is_sent(server: FakeJudgeServer) -> None:
    _answer(_template(server))
    _answer(_chat(server))
    for headers in server.request_headers:
        assert "authorization" not in {k.lower() for k in headers}


def test_a_chat_endpoint_gets_the_history_and_the_system_prompt(server: FakeJudgeServer) -> None:
    assert _answer(_chat(server, system_prompt="Be brief.")) == "Reinstall the VPN driver."
    [request] = server.requests
    assert request["model"] == "bot"
    assert request["messages"][0] == {"role": "system", "content": "Be brief."}
    assert request["messages"][-1] == {"role": "user", "content": "Why does the VPN drop?"}


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (server_error(), "http_error"),
        (auth_error(), "http_error"),
        (disconnect(), "connection"),
        (content("   "), "bad_response"),
    ],
)
def test_failures_are_reported_with_a_bounded_reason_for_both_kinds(
    server: FakeJudgeServer, reply: Any, reason: str
) -> None:
    server.responder = lambda _req: reply
    for config in (_chat(server), _template(server)):
        with pytest.raises(AssistantError) as caught:
            _answer(config)
        assert caught.value.reason == reason


def test_an_answer_missing_at_the_path_is_a_bad_response(server: FakeJudgeServer) -> None:
    with pytest.raises(AssistantError, match="bad_response"):
        _answer(_template(server, answer_path="$.data.answer"))


def test_an_unset_token_variable_is_a_config_error_when_the_client_is_built(
    server: FakeJudgeServer,
) -> None:
    config = _chat(server, api_key_env="CASEWATCH_TEST_NO_SUCH_TOKEN")
    with pytest.raises(ConfigError, match="CASEWATCH_TEST_NO_SUCH_TOKEN is not set"):
        AssistantClient(config)
