"""ChatEndpoint against the fake judge server: the real openai client over a real socket."""

import gc
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import httpx2
import openai
import pytest
from openai._utils._json import openapi_dumps
from openai.types.chat import ChatCompletionMessageParam

from monitor.errors import JudgeFatalError, JudgeTransientError
from monitor.judging.chat_endpoint import CallStats, ChatEndpoint
from monitor.judging.chat_reply import RequestParams, encode_body, encode_model
from monitor.judging.schema import judge_output_json_schema
from tests.fake_judge_server import FakeJudgeServer, Reply, scores, server_error, with_logprobs
from tests.fixtures.judge_server import FAKE_JUDGE_KEY, fake_judge_config

CONVERSATION = [
    {"role": "system", "content": "judge this"},
    {"role": "user", "content": 'a "quoted" turn\nwith a newline and unicode: é ✓'},
]


@pytest.fixture
def endpoint(fake_judge: FakeJudgeServer) -> Iterator[ChatEndpoint]:
    endpoint = ChatEndpoint("primary", fake_judge_config(fake_judge))
    yield endpoint
    endpoint.close()


def test_the_request_body_is_what_chat_completions_create_sends(
    fake_judge: FakeJudgeServer, endpoint: ChatEndpoint
) -> None:
    # send() skips the SDK's request transform (a CPU cost); the JSON on the wire must not change.
    params: dict[str, Any] = {
        "temperature": 0,
        "max_tokens": 50,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "s", "strict": True, "schema": judge_output_json_schema()},
        },
        "logprobs": True,
        "top_logprobs": 5,
    }
    fake_judge.script([scores(usage=(10, 3)) for _ in range(4)])
    call = CallStats()
    response = endpoint.send(CONVERSATION, call, **params)
    assert response.choices[0].message.content
    assert (call.requests, call.input_tokens, call.output_tokens) == (1, 10, 3)

    client = openai.OpenAI(api_key=FAKE_JUDGE_KEY, base_url=fake_judge.base_url, max_retries=0)
    try:
        client.chat.completions.create(
            model=endpoint.config.model,
            messages=cast(list[ChatCompletionMessageParam], CONVERSATION),
            **params,
        )
    finally:
        client.close()
    ours, sdk, *_ = fake_judge.requests
    assert ours == sdk
    ours_headers, sdk_headers = fake_judge.request_headers
    assert ours_headers["authorization"] == sdk_headers["authorization"]
    assert ours_headers["content-type"] == "application/json"

    # Encoded in parts (the constant ones once): byte for byte what the client sends when it
    # encodes the whole dict, as send() did before, with params given either way.
    endpoint.send(CONVERSATION, CallStats(), RequestParams.of(**params))
    client = openai.OpenAI(api_key=FAKE_JUDGE_KEY, base_url=fake_judge.base_url, max_retries=0)
    try:
        body = {"model": endpoint.config.model, "messages": CONVERSATION, **params}
        client.post("/chat/completions", body=body, cast_to=httpx2.Response)
    finally:
        client.close()
    ours_raw, _, prepared_raw, whole_dict_raw = fake_judge.request_bodies
    assert ours_raw == prepared_raw == whole_dict_raw
    assert "é ✓".encode() in ours_raw  # UTF-8, not \u escapes, as the client encodes


def test_the_body_encoding_matches_the_clients_encoder() -> None:
    schema = {"type": "json_schema", "json_schema": {"schema": judge_output_json_schema()}}
    for params in ({}, {"temperature": 0}, {"max_tokens": 5, "response_format": schema}):
        body = {"model": "m-ü", "messages": CONVERSATION, **params}
        assert encode_body(encode_model("m-ü"), CONVERSATION, RequestParams.of(**params)) == (
            openapi_dumps(body)
        )
    with pytest.raises(ValueError, match="filled in"):
        RequestParams.of(model="other")


@pytest.mark.parametrize(
    "body",
    [
        {"choices": "not a list"},
        {"choices": [{"no_message": 1}]},
        {"usage": {"prompt_tokens": "x"}},
    ],
)
def test_a_200_that_is_not_a_chat_completion_is_a_server_error(
    fake_judge: FakeJudgeServer, endpoint: ChatEndpoint, body: dict[str, Any]
) -> None:
    fake_judge.script([Reply(body=body)])
    with pytest.raises(JudgeTransientError) as caught:
        endpoint.send(CONVERSATION, CallStats())
    assert caught.value.reason == "server_error"
    assert "unreadable response" in str(caught.value)


def test_what_the_callers_read_comes_back(
    fake_judge: FakeJudgeServer, endpoint: ChatEndpoint
) -> None:
    fake_judge.script(
        [with_logprobs({"A": -0.1, "B": -2.5}, usage=(7, 1)), Reply(body={"id": "no choices"})]
    )
    call = CallStats()
    reply = endpoint.send(CONVERSATION, call)
    assert reply.choices and reply.choices[0].message.content == "A"
    assert reply.choices[0].finish_reason == "stop"
    logprobs = reply.choices[0].logprobs
    assert logprobs is not None and logprobs.content
    assert {t.token: t.logprob for t in logprobs.content[0].top_logprobs or []} == {
        "A": -0.1,
        "B": -2.5,
    }
    assert (call.input_tokens, call.output_tokens) == (7, 1)
    assert not endpoint.send(CONVERSATION, call).choices  # callers read that as no content


def test_errors_are_translated_as_before(
    fake_judge: FakeJudgeServer, endpoint: ChatEndpoint
) -> None:
    fake_judge.script([server_error(503)])
    with pytest.raises(JudgeTransientError) as caught:
        endpoint.send(CONVERSATION, CallStats())
    assert caught.value.reason == "server_error"
    assert isinstance(caught.value.__cause__, openai.APIStatusError)


def test_each_thread_has_its_own_client_and_finished_threads_give_theirs_back(
    fake_judge: FakeJudgeServer, endpoint: ChatEndpoint
) -> None:
    fake_judge.script([scores() for _ in range(40)])
    # A shared connection pool's lock was the bottleneck: calling threads never share a client.
    barrier = threading.Barrier(4)
    seen: list[int] = []

    def call() -> None:
        barrier.wait()  # all four threads hold a client at the same time
        endpoint.send(CONVERSATION, CallStats())
        seen.append(id(endpoint.transport.client()))

    with ThreadPoolExecutor(4) as pool:
        for future in [pool.submit(call) for _ in range(4)]:
            future.result()
    assert len(set(seen)) == 4

    # Jobs use short-lived pools: their finished threads' clients are closed, not kept.
    for _ in range(5):
        with ThreadPoolExecutor(2) as pool:
            for future in [pool.submit(endpoint.send, CONVERSATION, CallStats()) for _ in range(4)]:
                future.result()
    live = sum(1 for t in threading.enumerate() if t.name.startswith("ThreadPoolExecutor"))
    endpoint.send(CONVERSATION, CallStats())  # this thread's client prunes the dead threads'
    assert endpoint.clients <= live + 1


def test_a_closed_endpoint_refuses_new_calls(fake_judge: FakeJudgeServer) -> None:
    endpoint = ChatEndpoint("primary", fake_judge_config(fake_judge))
    fake_judge.script([scores()])
    endpoint.send(CONVERSATION, CallStats())
    endpoint.close()

    def from_a_new_thread() -> None:
        endpoint.send(CONVERSATION, CallStats())

    with ThreadPoolExecutor(1) as pool, pytest.raises(JudgeFatalError) as caught:
        pool.submit(from_a_new_thread).result()
    assert caught.value.reason == "connection"
    assert endpoint.clients == 0


def test_an_endpoint_dropped_without_close_leaves_its_clients_to_its_owner(
    fake_judge: FakeJudgeServer,
) -> None:
    # No finalizer closes for an owner that forgot: whoever builds an endpoint closes it
    # (the judges, the evaluator, the jobs and the commands that own them do).
    endpoint = ChatEndpoint("primary", fake_judge_config(fake_judge))
    fake_judge.script([scores()])
    endpoint.send(CONVERSATION, CallStats())
    client = endpoint.transport.client()
    transport = endpoint.transport
    del endpoint
    gc.collect()
    assert not client.is_closed()
    transport.close()
    assert client.is_closed()
