"""OpenAIJudge against the fake judge server: the real openai client over a real socket."""

import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import structlog

from monitor.judging.judge import FAILURE_REASONS, Judge
from monitor.judging.openai_judge import OpenAIJudge
from monitor.judging.prompt import PROMPT_VERSION, build_messages, prompt_hash
from monitor.judging.schema import judge_output_json_schema
from monitor.runtime.clock import ManualClock
from monitor.runtime.logs import configure_logging
from monitor.schema.turn import METRICS, Judgment
from tests.fake_judge_server import (
    FakeJudgeServer,
    Reply,
    auth_error,
    content,
    disconnect,
    extra_keys,
    llama_cpp_rejects_json_schema,
    loading_model,
    malformed,
    missing_metric,
    out_of_range,
    rate_limited,
    reject_inline_schema,
    reject_json_schema,
    scores,
    server_error,
    slow,
    truncated,
)
from tests.fixtures.judge_server import FAKE_JUDGE_KEY, fake_judge_config
from tests.fixtures.turns import marked_turn

MakeJudge = Callable[..., OpenAIJudge]


@pytest.fixture
def make_judge(fake_judge: FakeJudgeServer, clock: ManualClock) -> Iterator[MakeJudge]:
    judges: list[OpenAIJudge] = []

    def make(**overrides: Any) -> OpenAIJudge:
        judge = OpenAIJudge("primary", fake_judge_config(fake_judge, **overrides), clock=clock)
        judges.append(judge)
        return judge

    yield make
    for judge in judges:
        judge.close()


def assert_failed(judgment: Judgment, reason: str, attempts: int) -> None:
    assert (judgment.status, judgment.failure_reason, judgment.attempts) == (
        "judge_failed",
        reason,
        attempts,
    )
    assert reason in FAILURE_REASONS
    assert judgment.scores is None and not judgment.ok
    assert judgment.failure_detail and len(judgment.failure_detail) <= 300


def test_valid_reply_is_scored_with_tokens_and_cost(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    per_metric = {m: round(0.1 * (i + 1), 2) for i, m in enumerate(METRICS)}
    fake_judge.script([scores(per_metric, usage=(1000, 200))])
    judge = make_judge(price_input_per_mtok=3.0, price_output_per_mtok=12.0)
    assert isinstance(judge, Judge) and judge.name == "primary"
    turn = marked_turn()

    judgment = judge.judge(turn)

    assert (judgment.status, judgment.failure_reason, judgment.attempts) == ("ok", None, 1)
    assert judgment.scores is not None and judgment.scores.score_map() == per_metric
    assert (judgment.input_tokens, judgment.output_tokens) == (1000, 200)
    assert judgment.cost_usd == pytest.approx(1000 / 1e6 * 3.0 + 200 / 1e6 * 12.0)
    assert (judgment.judge, judgment.kind, judgment.model, judgment.role) == (
        "primary",
        "openai",
        "fake-judge",
        "single",
    )
    assert judgment.prompt_version == PROMPT_VERSION
    assert judgment.prompt_hash == prompt_hash(build_messages(turn))
    assert json.loads(judgment.raw_output or "")["hallucination"]["score"] == 0.1
    [request] = fake_judge.requests
    assert request["temperature"] == 0
    assert request["model"] == "fake-judge"
    assert request["messages"] == build_messages(turn)
    assert request["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "case_aware_judgment",
            "strict": True,
            "schema": judge_output_json_schema(),
        },
    }
    assert fake_judge.request_headers[0]["authorization"] == f"Bearer {FAKE_JUDGE_KEY}"


def test_invalid_then_valid_feeds_the_error_back(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    fake_judge.script([malformed(usage=(500, 20)), scores(0.7, usage=(600, 100))])
    judgment = make_judge().judge(marked_turn())

    assert (judgment.status, judgment.failure_reason, judgment.attempts) == ("ok", None, 2)
    assert (judgment.input_tokens, judgment.output_tokens) == (1100, 120)
    first, second = fake_judge.requests
    assert second["messages"][:2] == first["messages"]
    bad_reply, feedback = second["messages"][2:]
    assert bad_reply["role"] == "assistant" and bad_reply["content"].startswith('{"halluc')
    assert feedback["role"] == "user"
    assert "Your previous reply was not valid" in feedback["content"]
    assert "Invalid JSON" in feedback["content"]


@pytest.mark.parametrize(
    ("reply", "detail"),
    [
        (malformed(), "Invalid JSON"),
        (content(""), "empty reply"),
        (missing_metric("resolution_alignment"), "resolution_alignment: Field required"),
        (out_of_range("identifier_integrity", 1.5), "identifier_integrity.score"),
        (out_of_range("hallucination", -0.1), "hallucination.score"),
        (extra_keys(), "overall: Extra inputs are not permitted"),
    ],
    ids=["malformed", "empty", "missing-metric", "above-1", "below-0", "extra-keys"],
)
def test_invalid_every_time_fails_closed(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge, reply: Any, detail: str
) -> None:
    fake_judge.responder = lambda _request: reply
    judgment = make_judge(output_retries=2).judge(marked_turn())

    assert_failed(judgment, "invalid_output", attempts=3)
    assert detail in (judgment.failure_detail or "")
    assert judgment.raw_output == reply.content
    assert len(fake_judge.requests) == 3


def test_code_fenced_reply_is_accepted(fake_judge: FakeJudgeServer, make_judge: MakeJudge) -> None:
    fake_judge.script(
        [content("```json\n" + json.dumps(json.loads(scores(0.5).content or "")) + "\n```")]
    )
    judgment = make_judge().judge(marked_turn())
    assert (judgment.status, judgment.attempts) == ("ok", 1)


def test_rate_limit_honours_retry_after(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge, clock: ManualClock
) -> None:
    fake_judge.script([rate_limited(retry_after=0.75)])
    judgment = make_judge(backoff_max_seconds=2.0).judge(marked_turn())

    assert (judgment.status, judgment.failure_reason, judgment.attempts) == ("ok", None, 2)
    assert len(clock.sleeps) == 1 and clock.sleeps[0] >= 0.75
    assert judgment.latency_seconds == pytest.approx(clock.sleeps[0])


def test_retry_after_longer_than_the_backoff_cap_gives_up(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge, clock: ManualClock
) -> None:
    fake_judge.script([rate_limited(retry_after=120)])
    judgment = make_judge(backoff_max_seconds=30).judge(marked_turn())

    assert_failed(judgment, "rate_limited", attempts=1)
    assert clock.sleeps == []


def test_server_errors_until_the_retries_run_out(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge, clock: ManualClock
) -> None:
    fake_judge.responder = lambda _request: server_error(503)
    judgment = make_judge(
        transport_retries=3, backoff_initial_seconds=1.0, backoff_max_seconds=3.0
    ).judge(marked_turn())

    assert_failed(judgment, "server_error", attempts=4)
    assert "HTTP 503" in (judgment.failure_detail or "")
    # Exponential with jitter in [50 %, 100 %] of 1, 2, then the 3 s cap.
    assert len(clock.sleeps) == 3
    for sleep, ceiling in zip(clock.sleeps, (1.0, 2.0, 3.0), strict=True):
        assert ceiling / 2 <= sleep <= ceiling


def test_a_200_that_is_not_a_chat_completion_is_retried_as_a_server_error(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    fake_judge.script([Reply(body={"choices": [{"no_message": True}]}), scores()])
    judgment = make_judge(transport_retries=1).judge(marked_turn())
    assert judgment.ok and judgment.attempts == 2

    fake_judge.responder = lambda _request: Reply(body={"choices": "not a list"})
    judgment = make_judge(transport_retries=1).judge(marked_turn())
    assert_failed(judgment, "server_error", attempts=2)
    assert "unreadable response" in (judgment.failure_detail or "")


def test_reply_slower_than_the_timeout(fake_judge: FakeJudgeServer, make_judge: MakeJudge) -> None:
    fake_judge.responder = lambda _request: slow(5.0)
    judgment = make_judge(timeout_seconds=0.2, transport_retries=1).judge(marked_turn())
    assert_failed(judgment, "timeout", attempts=2)


def test_dropped_connections(fake_judge: FakeJudgeServer, make_judge: MakeJudge) -> None:
    fake_judge.responder = lambda _request: disconnect()
    judgment = make_judge(transport_retries=1).judge(marked_turn())
    assert_failed(judgment, "connection", attempts=2)


def test_unreachable_endpoint(clock: ManualClock) -> None:
    with FakeJudgeServer() as server:
        config = fake_judge_config(server, transport_retries=1)
    judge = OpenAIJudge("primary", config, clock=clock)  # the port is closed now
    try:
        assert_failed(judge.judge(marked_turn()), "connection", attempts=2)
    finally:
        judge.close()


def test_json_schema_rejected_falls_back_to_json_object_for_good(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    fake_judge.responder = reject_json_schema(then=scores(0.6))
    judge = make_judge()

    first = judge.judge(marked_turn())
    second = judge.judge(marked_turn())

    assert (first.status, first.attempts) == ("ok", 2)
    assert (second.status, second.attempts) == ("ok", 1)
    formats = [r["response_format"]["type"] for r in fake_judge.requests]
    assert formats == ["json_schema", "json_object", "json_object"]
    # JSON mode still carries the schema (llama.cpp's servers turn it into a grammar).
    assert fake_judge.requests[1]["response_format"]["schema"] == judge_output_json_schema()
    assert judge.response_mode == "json_object_schema"


def test_llama_cpp_500_naming_json_schema_is_a_rejection_not_a_server_error(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge, clock: ManualClock
) -> None:
    """llama-cpp-python answers its request validation error with a 500 quoting it: taken as
    the endpoint rejecting json_schema (asked again at once), not as a transient error to
    retry with backoff until the turn fails."""
    fake_judge.responder = llama_cpp_rejects_json_schema(then=scores(0.6))
    judge = make_judge()
    first = judge.judge(marked_turn())
    assert (first.status, first.attempts) == ("ok", 2)
    assert clock.sleeps == []
    assert judge.response_mode == "json_object_schema"


def test_a_500_not_naming_the_option_stays_a_server_error(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    fake_judge.responder = lambda _request: server_error(500)
    judgment = make_judge(transport_retries=1).judge(marked_turn())
    assert_failed(judgment, "server_error", attempts=2)
    assert all(r["response_format"]["type"] == "json_schema" for r in fake_judge.requests)


def test_a_server_refusing_both_schema_modes_gets_plain_json_mode(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    fake_judge.responder = reject_inline_schema(then=scores(0.7))
    judge = make_judge()
    assert judge.judge(marked_turn()).status == "ok"
    assert judge.judge(marked_turn()).attempts == 1
    assert [r["response_format"] for r in fake_judge.requests][1:] == [
        {"type": "json_object", "schema": judge_output_json_schema()},
        {"type": "json_object"},
        {"type": "json_object"},
    ]
    assert judge.response_mode == "json_object"


def test_a_reply_cut_at_max_tokens_is_retried_then_fails_as_truncated(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    fake_judge.responder = lambda _request: truncated()
    judgment = make_judge(output_retries=1).judge(marked_turn())
    assert_failed(judgment, "truncated", attempts=2)
    assert "max_tokens" in (judgment.failure_detail or "")
    feedback = fake_judge.requests[1]["messages"][-1]["content"]
    assert "cut off at the length limit" in feedback


def test_a_truncated_reply_then_a_complete_one_is_judged(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    fake_judge.script([truncated(), scores(0.8)])
    judgment = make_judge().judge(marked_turn())
    assert (judgment.status, judgment.attempts) == ("ok", 2)


def test_503_while_the_model_loads_is_retried(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge, clock: ManualClock
) -> None:
    fake_judge.script([loading_model(), loading_model()])
    judgment = make_judge(transport_retries=2).judge(marked_turn())
    assert (judgment.status, judgment.attempts) == ("ok", 3)
    assert len(clock.sleeps) == 2


def test_503_for_longer_than_the_retries_fails_as_server_error(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    fake_judge.responder = lambda _request: loading_model()
    judgment = make_judge(transport_retries=2).judge(marked_turn())
    assert_failed(judgment, "server_error", attempts=3)
    assert "Loading model" in (judgment.failure_detail or "")


def test_forced_json_schema_does_not_fall_back(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    fake_judge.responder = reject_json_schema()
    judgment = make_judge(response_format="json_schema").judge(marked_turn())
    assert_failed(judgment, "bad_request", attempts=1)


def test_forced_json_object_never_sends_a_schema(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    judgment = make_judge(response_format="json_object").judge(marked_turn())
    assert (judgment.status, judgment.attempts) == ("ok", 1)
    assert fake_judge.requests[0]["response_format"] == {"type": "json_object"}


def test_auth_failure_is_not_retried(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge, clock: ManualClock
) -> None:
    fake_judge.responder = lambda _request: auth_error()
    judgment = make_judge().judge(marked_turn())
    assert_failed(judgment, "auth", attempts=1)
    assert clock.sleeps == []


def test_concurrent_calls_share_one_judge(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    fake_judge.latency = 0.02
    fake_judge.responder = lambda request: scores(0.3 if "odd" in json.dumps(request) else 0.9)
    judge = make_judge()
    turns = [marked_turn(query=f"question {'odd' if i % 2 else 'even'} {i}") for i in range(24)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        judgments = list(pool.map(judge.judge, turns))

    assert [j.status for j in judgments] == ["ok"] * 24
    hallucination = [j.scores.hallucination.score for j in judgments if j.scores]
    assert hallucination == [0.9 if i % 2 == 0 else 0.3 for i in range(24)]
    assert fake_judge.request_count == 24


def test_max_concurrent_requests_holds_calls_back_at_the_judge(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    """A server serving one request at a time (llama-cpp-python) must not hold casewatch's
    queue: with max_concurrent_requests 1, eight threads send one request at a time."""
    fake_judge.latency = 0.02
    judge = make_judge(max_concurrent_requests=1)
    with ThreadPoolExecutor(max_workers=8) as pool:
        judgments = list(pool.map(judge.judge, [marked_turn() for _ in range(16)]))
    assert [j.status for j in judgments] == ["ok"] * 16
    assert fake_judge.peak_in_flight == 1


def test_without_a_limit_every_calling_thread_sends(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    together = threading.Barrier(4)

    def respond(_request: dict[str, Any]) -> Reply:
        together.wait(timeout=60)  # answers only once four requests are in the server at once
        return scores(0.9)

    fake_judge.responder = respond
    judge = make_judge(timeout_seconds=120)
    with ThreadPoolExecutor(max_workers=4) as pool:
        assert all(j.ok for j in pool.map(judge.judge, [marked_turn() for _ in range(4)]))


class JsonLogs:
    """structlog JSON lines captured through capsys."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self._capsys = capsys

    def start(self) -> None:
        # Inside the test body: capsys swaps sys.stderr between the setup and call phases,
        # and structlog's PrintLogger keeps the stream it was configured with.
        configure_logging(level="debug", json=True, secrets=[FAKE_JUDGE_KEY])

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self._capsys.readouterr().err.splitlines() if line]


@pytest.fixture
def json_logs(capsys: pytest.CaptureFixture[str]) -> Iterator[JsonLogs]:
    yield JsonLogs(capsys)
    structlog.reset_defaults()


def test_logs_never_carry_the_key_or_conversation_text(
    fake_judge: FakeJudgeServer,
    make_judge: MakeJudge,
    json_logs: JsonLogs,
) -> None:
    json_logs.start()
    marker = "CONVERSATION-TEXT-7f3e"
    fake_judge.script(
        [
            malformed(),
            rate_limited(retry_after=0.01),
            scores(0.8),
            auth_error(f"Incorrect API key provided: {FAKE_JUDGE_KEY}. {marker}"),
        ]
    )
    judge = make_judge()
    turn = marked_turn(query=f"{marker} query", answer=f"{marker} answer")

    ok = judge.judge(turn)
    failed = judge.judge(turn)

    assert ok.status == "ok" and failed.failure_reason == "auth"
    assert FAKE_JUDGE_KEY not in (failed.failure_detail or "")
    records = json_logs.records()
    events = [r["event"] for r in records]
    assert events == ["judge.output_invalid", "judge.retrying", "judge.scored", "judge.failed"]
    assert all(r["judge"] == "primary" for r in records)
    assert records[1]["reason"] == "rate_limited"
    assert records[-1]["reason"] == "auth"
    text = json.dumps(records)
    assert FAKE_JUDGE_KEY not in text
    assert marker not in text
