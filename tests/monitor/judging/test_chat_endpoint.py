"""ChatEndpoint against the fake judge server: the real openai client over a real socket."""

import gc
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from monitor.errors import JudgeFatalError, JudgeTransientError
from monitor.judging.chat_endpoint import CallStats, ChatEndpoint
from monitor.judging.schema import judge_output_json_schema
from tests.fake_judge_server import FakeJudgeServer, scores, server_error
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
    fake_judge.script([scores(usage=(10, 3)), scores(usage=(10, 3))])
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
    ours, sdk = fake_judge.requests
    assert ours == sdk
    ours_headers, sdk_headers = fake_judge.request_headers
    assert ours_headers["authorization"] == sdk_headers["authorization"]
    assert ours_headers["content-type"] == "application/json"


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
        seen.append(id(endpoint._client()))

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


def test_an_endpoint_dropped_without_close_closes_its_clients(fake_judge: FakeJudgeServer) -> None:
    # Scheduled jobs never close their judges; their sockets must not outlive the endpoint.
    endpoint = ChatEndpoint("primary", fake_judge_config(fake_judge))
    fake_judge.script([scores()])
    endpoint.send(CONVERSATION, CallStats())
    client = endpoint._client()
    assert not client.is_closed()
    del endpoint
    gc.collect()
    assert client.is_closed()
