"""The fake judge server itself: what other tests and the benchmarks rely on."""

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import openai

from monitor.judging.openai_judge import OpenAIJudge
from tests.fake_judge_server import (
    FakeJudgeServer,
    Reply,
    case_data_of,
    scores,
    with_logprobs,
)
from tests.fixtures.judge_server import fake_judge_config
from tests.fixtures.turns import marked_turn

ROOT = Path(__file__).resolve().parents[1]


def chat(client: openai.OpenAI) -> str | None:
    response = client.chat.completions.create(
        model="fake-judge", messages=[{"role": "user", "content": "hi"}]
    )
    return response.choices[0].message.content


def test_close_ends_idle_keep_alive_connections() -> None:
    before = threading.active_count()
    server = FakeJudgeServer().start()
    client = openai.OpenAI(api_key="k", base_url=server.base_url, max_retries=0)
    try:
        for _ in range(3):
            chat(client)  # one pooled connection, left open by the client
        assert threading.active_count() > before
        server.close()  # must not wait for the client to hang up
        assert threading.active_count() == before, threading.enumerate()
    finally:
        client.close()
        server.close()
    assert server.request_count == 3


def test_responders_can_answer_per_model_and_per_turn_content() -> None:
    def responder(request: dict[str, Any]) -> Reply:
        data = case_data_of(request) or {}
        low = request["model"] == "judge-b" and "refund" in str(data.get("query"))
        return scores(0.2 if low else 0.9)

    with FakeJudgeServer(responder) as server:
        a = OpenAIJudge("a", fake_judge_config(server, model="judge-a"))
        b = OpenAIJudge("b", fake_judge_config(server, model="judge-b"))
        try:
            refund = marked_turn(query="Where is my refund?")
            other = marked_turn(query="How do I reset it?")
            got = [(j.name, t.query, j.judge(t).scores) for j in (a, b) for t in (refund, other)]
        finally:
            a.close()
            b.close()
    assert [(name, query, s.hallucination.score if s else None) for name, query, s in got] == [
        ("a", "Where is my refund?", 0.9),
        ("a", "How do I reset it?", 0.9),
        ("b", "Where is my refund?", 0.2),
        ("b", "How do I reset it?", 0.9),
    ]


def test_logprob_replies_reach_the_client() -> None:
    with FakeJudgeServer() as server:
        server.script([with_logprobs({"A": -0.2, "B": -1.9, "Tie": -3.1})])
        client = openai.OpenAI(api_key="k", base_url=server.base_url, max_retries=0)
        try:
            response = client.chat.completions.create(
                model="fake-judge",
                messages=[{"role": "user", "content": "A or B?"}],
                logprobs=True,
                top_logprobs=3,
            )
        finally:
            client.close()
    choice = response.choices[0]
    assert choice.message.content == "A"
    assert choice.logprobs is not None and choice.logprobs.content is not None
    top = choice.logprobs.content[0].top_logprobs
    assert [(t.token, t.logprob) for t in top] == [("A", -0.2), ("B", -1.9), ("Tie", -3.1)]
    assert response.usage is not None and response.usage.total_tokens > 0


def test_runs_standalone_until_sigterm() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fake_judge_server", "--port", "0", "--score", "0.4"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("base_url=http://127.0.0.1:")
        client = openai.OpenAI(api_key="k", base_url=line.removeprefix("base_url="))
        try:
            assert '"score": 0.4' in (chat(client) or "")
        finally:
            client.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
