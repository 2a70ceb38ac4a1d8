"""The pairwise {A, B, Tie} judge of DICE over an OpenAI-compatible endpoint.

``compare(question, first, second)`` judges the pair in the given order and, unless
``swap=False``, again with the answers swapped; ``monitor.judging.pairwise_scoring`` turns
each decision into scores and averages the two orders. One order is two requests:

1. stage 1: the analysis (temperature 0, free text);
2. stage 2: the same conversation plus the analysis, asking for one token from {A, B, Tie}
   with ``logprobs`` and ``top_logprobs``. With logprobs the score is confidence-aware (hard
   or soft); an endpoint that returns none (or rejects the parameter with a 400, after which
   this judge stops asking) gives the parsed label's hard score, ``confidence = unknown``.

A stage-2 reply that is not a label is asked again up to ``output_retries`` times (the bad
reply fed back), then the order is recorded ``judge_failed`` with ``invalid_output``: a label
is never guessed. Transport failures go through ``ChatEndpoint``'s one retry loop and end as
``judge_failed`` with its bounded reason (timeout, rate_limited, ...). If either order fails,
the pair is failed too (one order alone would bring the position bias back); both orders'
raw outputs are kept either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

import structlog
from pydantic import BaseModel, ConfigDict

from monitor.config.judges import JudgeConfig
from monitor.errors import JudgeFatalError, JudgeOutputInvalid, JudgeTransientError
from monitor.judging.chat_endpoint import CallStats, ChatEndpoint, OptionalParam, content_of
from monitor.judging.chat_reply import ChatReply, RequestParams
from monitor.judging.pairwise_prompt import (
    PAIRWISE_PROMPT_VERSION,
    PairwiseAnswer,
    PairwiseQuestion,
    stage1_messages,
    stage2_messages,
)
from monitor.judging.pairwise_scoring import (
    DEFAULT_CONFIDENCE_THRESHOLD,
    Kind,
    Label,
    Outcome,
    PairScore,
    combine_orders,
    parse_label,
    score_label,
    score_logprobs,
)
from monitor.runtime.clock import Clock

_log = structlog.get_logger("monitor.judging.pairwise_judge")
_MAX_RAW_CHARS = 20_000


@dataclass(frozen=True)
class PairwiseOptions:
    swap: bool = True  # judge both orders and average (position-bias control)
    threshold: float = DEFAULT_CONFIDENCE_THRESHOLD  # ΔP for a hard score
    top_logprobs: int = 5
    decision_max_tokens: int = 1

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {self.threshold}")
        if not 1 <= self.top_logprobs <= 20:
            raise ValueError(f"top_logprobs must be in 1..20, got {self.top_logprobs}")
        if self.decision_max_tokens < 1:
            raise ValueError("decision_max_tokens must be >= 1")


class OrderJudgment(BaseModel):
    """One judged order: raw outputs for audit and, when it worked, its score."""

    model_config = ConfigDict(frozen=True)

    status: Literal["ok", "judge_failed"]
    failure_reason: str | None = None
    failure_detail: str | None = None
    analysis: str | None = None  # stage-1 raw output
    decision: str | None = None  # stage-2 raw output (last attempt)
    top_logprobs: dict[str, float] | None = None  # of the decision token
    label: Label | None = None
    kind: Kind | None = None
    score_a: float | None = None  # of the answer shown as A in this order
    score_b: float | None = None
    probabilities: dict[str, float] | None = None
    delta_p: float | None = None
    attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_seconds: float = 0.0

    def pair_score(self) -> PairScore | None:
        if (
            self.status != "ok"
            or self.label is None
            or self.kind is None
            or self.score_a is None
            or self.score_b is None
        ):
            return None
        return PairScore(
            self.score_a, self.score_b, self.kind, self.label, self.probabilities, self.delta_p
        )


class PairwiseJudgment(BaseModel):
    """A pair judged in one or both orders, from the first-named answer's point of view."""

    model_config = ConfigDict(frozen=True)

    judge: str
    model: str
    prompt_version: str = PAIRWISE_PROMPT_VERSION
    status: Literal["ok", "judge_failed"]
    failure_reason: str | None = None
    forward: OrderJudgment
    swapped: OrderJudgment | None = None
    score_first: float | None = None  # averaged over the orders
    score_second: float | None = None
    outcome: Outcome | None = None  # of the first-named answer
    disagreement: float | None = None  # |score(first shown first) - score(first shown second)|
    label_flipped: bool | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def kinds(self) -> list[Kind]:
        orders = [self.forward, *([self.swapped] if self.swapped else [])]
        return [o.kind for o in orders if o.kind is not None]

    @property
    def cost_usd(self) -> float:
        return self.forward.cost_usd + (self.swapped.cost_usd if self.swapped else 0.0)


class PairwiseJudge(Protocol):
    @property
    def name(self) -> str: ...

    def compare(
        self, question: PairwiseQuestion, first: PairwiseAnswer, second: PairwiseAnswer
    ) -> PairwiseJudgment:
        """Never raises for judge trouble: failures come back as judge_failed."""
        ...

    def close(self) -> None: ...


def combine(
    judge: str,
    model: str,
    forward: OrderJudgment,
    swapped: OrderJudgment | None,
) -> PairwiseJudgment:
    """The pair's result from its judged orders (either failing fails the pair)."""
    base: dict[str, Any] = {"judge": judge, "model": model, "forward": forward, "swapped": swapped}
    failed = next((o for o in (forward, swapped) if o is not None and o.status != "ok"), None)
    if failed is not None:
        return PairwiseJudgment(status="judge_failed", failure_reason=failed.failure_reason, **base)
    fwd = forward.pair_score()
    if fwd is None:
        raise ValueError("an ok order must carry its score")
    combined = combine_orders(fwd, swapped.pair_score() if swapped else None)
    return PairwiseJudgment(
        status="ok",
        score_first=combined.score_a,
        score_second=combined.score_b,
        outcome=combined.outcome,
        disagreement=combined.disagreement if swapped else None,
        label_flipped=combined.label_flipped if swapped else None,
        **base,
    )


class OpenAIPairwiseJudge:
    """DICE's two-stage judge on an OpenAI-compatible chat endpoint."""

    def __init__(
        self,
        name: str,
        config: JudgeConfig,
        options: PairwiseOptions | None = None,
        *,
        clock: Clock | None = None,
    ) -> None:
        self._name = name
        self._config = config
        self._options = options or PairwiseOptions()
        self._endpoint = ChatEndpoint(name, config, clock=clock)
        self._clock = self._endpoint.clock
        # Decisions without logprobs get confidence=unknown once the endpoint rejects them.
        self._logprobs = OptionalParam("logprobs", ("logprobs",))
        plain = {"temperature": 0, "max_tokens": self._options.decision_max_tokens}
        self._without_logprobs = RequestParams.of(**plain)
        self._with_logprobs = RequestParams.of(
            **plain, logprobs=True, top_logprobs=self._options.top_logprobs
        )

    @property
    def name(self) -> str:
        return self._name

    def close(self) -> None:
        self._endpoint.close()

    def compare(
        self, question: PairwiseQuestion, first: PairwiseAnswer, second: PairwiseAnswer
    ) -> PairwiseJudgment:
        forward = self.judge_order(question, first, second)
        swapped = None
        if self._options.swap and forward.status == "ok":
            swapped = self.judge_order(question, second, first)
        return combine(self._name, self._config.model, forward, swapped)

    def judge_order(
        self, question: PairwiseQuestion, a: PairwiseAnswer, b: PairwiseAnswer
    ) -> OrderJudgment:
        """One order: answer ``a`` shown as A, ``b`` as B."""
        start = self._clock.monotonic()
        call = CallStats()
        analysis: str | None = None
        decision: dict[str, Any] = {}
        try:
            stage1 = stage1_messages(question, a, b)
            analysis = self._analysis(stage1, call)
            decision = self._decision(stage2_messages(stage1, analysis), call)
        except JudgeOutputInvalid as exc:
            return self._failed(call, start, "invalid_output", str(exc), analysis, decision)
        except (JudgeTransientError, JudgeFatalError) as exc:
            return self._failed(call, start, exc.reason, str(exc), analysis, decision)
        except Exception as exc:  # a bug costs one pair, not the job
            _log.exception("pairwise.internal_error", judge=self._name)
            return self._failed(call, start, "internal", repr(exc), analysis, decision)
        score: PairScore = decision["score"]
        return OrderJudgment(
            status="ok",
            analysis=analysis,
            decision=decision["raw"],
            top_logprobs=decision["top"],
            label=score.label,
            kind=score.kind,
            score_a=score.score_a,
            score_b=score.score_b,
            probabilities=dict(score.probabilities) if score.probabilities else None,
            delta_p=score.delta_p,
            **self._usage(call, start),
        )

    # ------------------------------------------------------------------ stages

    def _analysis(self, messages: list[dict[str, str]], call: CallStats) -> str:
        return self._endpoint.ask_valid(
            messages,
            call,
            lambda conversation: self._endpoint.send(
                conversation, call, temperature=0, max_tokens=self._config.max_output_tokens
            ),
            _analysis_text,
            lambda _error: _ANALYSIS_FEEDBACK,
        )

    def _decision(self, messages: list[dict[str, str]], call: CallStats) -> dict[str, Any]:
        return self._endpoint.ask_valid(
            messages,
            call,
            lambda conversation: self._ask(conversation, call),
            lambda reply: self._parse_decision(reply, call),
            lambda _error: _FEEDBACK,
        )

    def _parse_decision(self, response: ChatReply, call: CallStats) -> dict[str, Any]:
        raw = content_of(response)
        call.raw = raw[:_MAX_RAW_CHARS]
        top = _decision_top_logprobs(response)
        label = parse_label(raw)
        if label is None and top:
            # max_tokens may cut a reply after its first token: the token is the decision.
            label = parse_label(next(iter(top)))
        if label is None:
            raise JudgeOutputInvalid(f"no A, B or Tie decision in {raw[:80]!r}")
        score = score_logprobs(top.items(), self._options.threshold) if top else None
        return {"raw": raw, "top": top, "score": score or score_label(label)}

    def _ask(self, conversation: list[dict[str, str]], call: CallStats) -> ChatReply:
        return self._endpoint.send_optional(
            conversation, call, self._logprobs, self._with_logprobs, self._without_logprobs
        )

    # ------------------------------------------------------------------ results

    def _usage(self, call: CallStats, start: float) -> dict[str, Any]:
        return {
            "attempts": call.requests,
            "input_tokens": call.input_tokens,
            "output_tokens": call.output_tokens,
            "cost_usd": call.cost_usd(self._config),
            "latency_seconds": max(0.0, self._clock.monotonic() - start),
        }

    def _failed(
        self,
        call: CallStats,
        start: float,
        reason: str,
        detail: str,
        analysis: str | None,
        decision: dict[str, Any],
    ) -> OrderJudgment:
        _log.warning("pairwise.failed", judge=self._name, reason=reason, attempts=call.requests)
        return OrderJudgment(
            status="judge_failed",
            failure_reason=reason,
            failure_detail=self._endpoint.short(detail),
            analysis=analysis,
            decision=decision.get("raw", call.raw),
            **self._usage(call, start),
        )


_FEEDBACK = (
    "Your previous reply was not a valid decision. Reply with exactly one token: A, B or Tie."
)
_ANALYSIS_FEEDBACK = "Your previous reply was empty. Write your analysis of the two answers."


def _analysis_text(reply: ChatReply) -> str:
    text = content_of(reply)
    if not text.strip():
        raise JudgeOutputInvalid("the judge returned no analysis")
    return text[:_MAX_RAW_CHARS]


def _decision_top_logprobs(response: ChatReply) -> dict[str, float] | None:
    """{token: logprob} of the first non-blank token of the reply, most likely first; None
    when the endpoint returned no logprobs, or no alternatives (``top_logprobs``) for it."""
    if not response.choices:
        return None
    logprobs = response.choices[0].logprobs
    if logprobs is None or not logprobs.content:
        return None
    for entry in logprobs.content:
        if not entry.token.strip():
            continue  # a leading space or newline token is not the decision
        if not entry.top_logprobs:
            # The chosen token alone: every missing label would get its own logprob as the
            # floor (P = 1/3 each), a confidence the endpoint never expressed.
            return None
        top: dict[str, float] = {}
        for alt in sorted(entry.top_logprobs or [], key=lambda t: -t.logprob):
            top.setdefault(alt.token, alt.logprob)
        top.setdefault(entry.token, entry.logprob)
        return top
    return None


__all__ = [
    "OpenAIPairwiseJudge",
    "OrderJudgment",
    "PairwiseJudge",
    "PairwiseJudgment",
    "PairwiseOptions",
    "combine",
]
