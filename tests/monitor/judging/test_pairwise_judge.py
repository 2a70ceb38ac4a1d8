"""The pairwise judge against the fake judge server: the real openai client over HTTP."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from monitor.judging.pairwise_judge import OpenAIPairwiseJudge, PairwiseOptions
from monitor.judging.pairwise_prompt import STAGE2_INSTRUCTION, PairwiseAnswer, PairwiseQuestion
from monitor.runtime.clock import ManualClock
from monitor.schema.turn import Case, Context
from tests.fake_judge_server import (
    FakeJudgeServer,
    Reply,
    content,
    http_error,
    is_decision_request,
    pairwise,
    slow,
    with_logprobs,
)
from tests.fixtures.judge_server import fake_judge_config

MakeJudge = Callable[..., OpenAIPairwiseJudge]

QUESTION = PairwiseQuestion(
    case=Case(subject="What is a TACO trade?", description="Why does Wall Street use it?"),
    query="What is a TACO trade? Why does Wall Street use this strategy?",
    contexts=[Context(id="c1", text="Trump announced he would double the tariffs.")],
    reference="TACO: 'Trump always chickens out'; buying the dip after tariff threats.",
)
GOOD = PairwiseAnswer(text="TACO trading assumes Trump withdraws tariff threats; buy the dip.")
WORSE = PairwiseAnswer(text="TACO trading is buying the dip after tariff threats.")
APPENDIX = {"A": math.log(0.83), "Tie": math.log(0.16), "B": math.log(1e-6)}


@pytest.fixture
def make_judge(fake_judge: FakeJudgeServer) -> Iterator[MakeJudge]:
    judges: list[OpenAIPairwiseJudge] = []

    def make(*, swap: bool = True, **overrides: Any) -> OpenAIPairwiseJudge:
        judge = OpenAIPairwiseJudge(
            "pairwise",
            fake_judge_config(fake_judge, **overrides),
            PairwiseOptions(swap=swap),
            clock=ManualClock(),
        )
        judges.append(judge)
        return judge

    yield make
    for judge in judges:
        judge.close()


def prefers(text: str, top: dict[str, float]) -> Callable[[dict[str, Any]], dict[str, float]]:
    """Decide by content: ``top`` for the position holding ``text``, mirrored otherwise."""

    def decide(pair: dict[str, Any]) -> dict[str, float]:
        if pair["answer_a"] == text:
            return top
        return {{"A": "B", "B": "A"}.get(t, t): lp for t, lp in top.items()}

    return decide


def test_seed_appendix_example_end_to_end(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    fake_judge.responder = pairwise(lambda _pair: APPENDIX)
    result = make_judge(swap=False).compare(QUESTION, GOOD, WORSE)
    assert result.ok and result.outcome == "win"
    assert (result.score_first, result.score_second) == (1.0, 0.0)
    order = result.forward
    assert (order.kind, order.label) == ("hard", "A")
    assert order.probabilities is not None
    assert order.probabilities["A"] == pytest.approx(0.83, abs=0.01)
    assert order.probabilities["Tie"] == pytest.approx(0.16, abs=0.01)
    assert order.delta_p == pytest.approx(0.67, abs=0.01)
    assert order.analysis is not None and "Final judgment" in order.analysis
    assert order.attempts == 2  # stage 1 + stage 2

    stage1, stage2 = fake_judge.requests
    assert not is_decision_request(stage1) and "logprobs" not in stage1
    assert (stage2["logprobs"], stage2["top_logprobs"], stage2["max_tokens"]) == (True, 5, 1)
    assert stage2["messages"][-2] == {"role": "assistant", "content": order.analysis}
    assert stage2["messages"][-1]["content"] == STAGE2_INSTRUCTION


def test_soft_case_computed_by_hand(fake_judge: FakeJudgeServer, make_judge: MakeJudge) -> None:
    top = {"A": math.log(0.40), "B": math.log(0.35), "Tie": math.log(0.25)}
    fake_judge.responder = pairwise(lambda _pair: top)
    result = make_judge(swap=False).compare(QUESTION, GOOD, WORSE)
    assert result.forward.kind == "soft"
    # 0.40 + 0.25 * 0.40 / 0.75 = 8/15
    assert result.score_first == pytest.approx(8 / 15)
    assert result.outcome == "win"


def test_endpoint_without_logprobs_gives_unknown_confidence(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    fake_judge.responder = pairwise(lambda _pair: "B")
    result = make_judge(swap=False).compare(QUESTION, GOOD, WORSE)
    assert result.ok and result.forward.kind == "unknown"
    assert result.forward.top_logprobs is None and result.forward.probabilities is None
    assert (result.score_first, result.outcome) == (0.0, "loss")


def test_endpoint_rejecting_logprobs_is_asked_without_them(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    def respond(request: dict[str, Any]) -> Any:
        if request.get("logprobs"):
            return http_error(400, "logprobs is not supported by this model", param="logprobs")
        return pairwise(lambda _pair: "Tie")(request)

    fake_judge.responder = respond
    judge = make_judge(swap=False)
    result = judge.compare(QUESTION, GOOD, WORSE)
    assert result.ok and result.forward.kind == "unknown" and result.outcome == "tie"
    judge.compare(QUESTION, GOOD, WORSE)  # remembers: no rejected request the second time
    assert sum(1 for r in fake_judge.requests if r.get("logprobs")) == 1


def test_a_llama_cpp_model_without_logits_rejects_logprobs_with_a_500(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    """llama-cpp-python's server on a model loaded with logits_all=False raises a ValueError
    for logprobs, which its error handler answers as a 500: a rejection of the option (asked
    again at once without it), not a server error retried until the pair fails."""

    def respond(request: dict[str, Any]) -> Any:
        if request.get("logprobs"):
            return http_error(
                500,
                "logprobs is not supported for models created with logits_all=False",
                error_type="internal_server_error",
            )
        return pairwise(lambda _pair: "A")(request)

    fake_judge.responder = respond
    result = make_judge(swap=False, transport_retries=0).compare(QUESTION, GOOD, WORSE)
    assert result.ok and result.forward.kind == "unknown" and result.outcome == "win"


def test_missing_label_gets_the_floor(fake_judge: FakeJudgeServer, make_judge: MakeJudge) -> None:
    fake_judge.responder = pairwise(lambda _pair: {"A": -0.5, "B": -1.0, "The": -3.0})
    result = make_judge(swap=False).compare(QUESTION, GOOD, WORSE)
    probabilities = result.forward.probabilities
    assert probabilities is not None
    total = math.exp(-0.5) + math.exp(-1.0) + math.exp(-3.0)
    assert probabilities["Tie"] == pytest.approx(math.exp(-3.0) / total)
    assert result.forward.top_logprobs == {"A": -0.5, "B": -1.0, "The": -3.0}


def test_swapped_order_is_judged_and_averaged(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    fake_judge.responder = pairwise(prefers(GOOD.text, APPENDIX))
    result = make_judge().compare(QUESTION, GOOD, WORSE)
    assert result.swapped is not None and result.swapped.label == "B"  # GOOD shown as B
    assert (result.score_first, result.disagreement, result.label_flipped) == (1.0, 0.0, False)
    stage1_swapped = fake_judge.requests[2]
    assert "TACO trading is buying" in stage1_swapped["messages"][1]["content"].split("answer_b")[0]


def test_position_bias_shows_as_disagreement(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    fake_judge.responder = pairwise(lambda _pair: APPENDIX)  # always prefers what it sees first
    result = make_judge().compare(QUESTION, GOOD, WORSE)
    assert (result.score_first, result.outcome) == (0.5, "tie")
    assert (result.disagreement, result.label_flipped) == (1.0, True)


def test_unparseable_label_is_retried_then_recorded_failed(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    fake_judge.responder = pairwise(lambda _pair: "Maybe")
    result = make_judge(output_retries=2).compare(QUESTION, GOOD, WORSE)
    assert (result.status, result.failure_reason) == ("judge_failed", "invalid_output")
    assert result.score_first is None and result.outcome is None  # never guessed
    assert result.forward.decision == "Maybe" and result.forward.analysis is not None
    assert result.forward.attempts == 1 + 3
    assert result.swapped is None
    feedback = fake_judge.requests[-1]["messages"]
    assert feedback[-2] == {"role": "assistant", "content": "Maybe"}


def test_label_after_a_retry_is_used(fake_judge: FakeJudgeServer, make_judge: MakeJudge) -> None:
    replies = iter(["Neither", "A"])
    fake_judge.responder = pairwise(lambda _pair: next(replies))
    result = make_judge(swap=False).compare(QUESTION, GOOD, WORSE)
    assert result.ok and result.forward.label == "A" and result.forward.attempts == 3


def test_endpoint_timeout_is_retried_then_failed(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    fake_judge.responder = lambda _request: slow(5.0, content("analysis"))
    result = make_judge(timeout_seconds=0.2, transport_retries=1).compare(QUESTION, GOOD, WORSE)
    assert (result.status, result.failure_reason) == ("judge_failed", "timeout")
    assert result.forward.attempts == 2 and result.forward.analysis is None


def test_timeout_in_the_swapped_order_fails_the_pair_but_keeps_the_first(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    decide = pairwise(lambda _pair: APPENDIX)
    fake_judge.script([decide, decide])  # the first order answers at once
    fake_judge.responder = lambda _request: slow(5.0, with_logprobs(APPENDIX))
    result = make_judge(timeout_seconds=0.2, transport_retries=0).compare(QUESTION, GOOD, WORSE)
    assert (result.status, result.failure_reason) == ("judge_failed", "timeout")
    assert result.forward.status == "ok" and result.forward.label == "A"
    assert result.swapped is not None and result.swapped.status == "judge_failed"


def test_logprobs_without_alternatives_count_as_none(
    fake_judge: FakeJudgeServer, make_judge: MakeJudge
) -> None:
    bare = Reply(
        content="A", logprobs=[{"token": "A", "logprob": -0.1, "bytes": [65], "top_logprobs": []}]
    )
    fake_judge.responder = pairwise(lambda _pair: bare)
    result = make_judge(swap=False).compare(QUESTION, GOOD, WORSE)
    assert result.ok and result.forward.kind == "unknown" and result.score_first == 1.0
