"""The case judge for any OpenAI-compatible chat-completions endpoint, and the case judge
protocol.

It keeps the turn judge's contract (``monitor.judging.openai_judge``), through the same
``ChatEndpoint``: transport retries with backoff and Retry-After, the response format
negotiated most constraining first (``json_schema``, JSON mode carrying the schema, plain JSON
mode), a reply that does not validate as ``CaseScores`` asked again with the bad reply and the
errors fed back up to ``output_retries`` times, and every anticipated failure returned as a
``judge_failed`` ``CaseJudgment`` with a bounded reason (``monitor.judging.judge
.FAILURE_REASONS``), never raised. The prompt (``monitor.judging.case_prompt``) is cut to
``max_prompt_chars``; the judgment says how many turns were cut.
"""

from __future__ import annotations

from typing import Any, Protocol

import structlog

from monitor.config.judges import JudgeConfig
from monitor.errors import (
    JudgeFatalError,
    JudgeOutputInvalid,
    JudgeOutputTruncated,
    JudgeTransientError,
)
from monitor.judging.case_prompt import CASE_PROMPT_VERSION, build_case_prompt, prompt_hash
from monitor.judging.case_schema import (
    CASE_SCHEMA_NAME,
    case_output_json_schema,
    parse_case_output,
)
from monitor.judging.chat_endpoint import CallStats, ChatEndpoint, OptionalParam, content_of
from monitor.judging.chat_reply import ChatReply, RequestParams
from monitor.runtime.clock import Clock
from monitor.schema.case import Case, CaseJudgment
from monitor.schema.turn import MAX_JUSTIFICATION_CHARS, JudgeRole

_log = structlog.get_logger(__name__)
_MAX_FEEDBACK_CHARS = 1500


class CaseJudge(Protocol):
    """Scores one case on the case metrics; failures come back as judge_failed judgments."""

    @property
    def name(self) -> str: ...

    def judge_case(self, case: Case) -> tuple[CaseJudgment, int]:
        """The judgment and how many of the case's turns its prompt left out."""
        ...

    def close(self) -> None: ...


class OpenAICaseJudge:
    def __init__(
        self,
        name: str,
        config: JudgeConfig,
        role: JudgeRole = "single",
        *,
        max_prompt_chars: int,
        clock: Clock | None = None,
    ) -> None:
        self._name = name
        self._config = config
        self._role: JudgeRole = role
        self._max_chars = max_prompt_chars
        self._endpoint = ChatEndpoint(name, config, clock=clock)
        self._clock = self._endpoint.clock
        self._json_schema = OptionalParam(
            "json_schema",
            ("response_format", "json_schema"),
            enabled=config.response_format != "json_object",
        )
        self._inline_schema = OptionalParam(
            "json_object with a schema",
            ("response_format", "schema"),
            enabled=config.response_format == "auto",
        )
        schema = case_output_json_schema()
        strict = {
            "type": "json_schema",
            "json_schema": {"name": CASE_SCHEMA_NAME, "strict": True, "schema": schema},
        }
        self._strict = self._params(strict)
        self._inline = self._params({"type": "json_object", "schema": schema})
        self._object = self._params({"type": "json_object"})

    def _params(self, response_format: dict[str, Any]) -> RequestParams:
        return RequestParams.of(
            temperature=0,
            max_tokens=self._config.max_output_tokens,
            response_format=response_format,
        )

    @property
    def name(self) -> str:
        return self._name

    def close(self) -> None:
        self._endpoint.close()

    def judge_case(self, case: Case) -> tuple[CaseJudgment, int]:
        start = self._clock.monotonic()
        prompt = build_case_prompt(case, self._max_chars)
        call = CallStats()
        base = {
            "prompt_version": CASE_PROMPT_VERSION,
            "prompt_hash": prompt_hash(prompt.messages),
        }
        try:
            scores = self._endpoint.ask_valid(
                prompt.messages,
                call,
                lambda conversation: self._request(conversation, call),
                lambda reply: parse_case_output(content_of(reply)),
                _feedback,
            )
        except JudgeOutputTruncated as exc:
            return self._failed(call, start, base, "truncated", str(exc)), prompt.turns_cut
        except JudgeOutputInvalid as exc:
            return self._failed(call, start, base, "invalid_output", str(exc)), prompt.turns_cut
        except (JudgeTransientError, JudgeFatalError) as exc:
            return self._failed(call, start, base, exc.reason, str(exc)), prompt.turns_cut
        except Exception as exc:  # a bug must cost one case, not the job's run
            _log.exception("case_judge.internal_error", judge=self._name)
            failed = self._failed(call, start, base, "internal", type(exc).__name__)
            return failed, prompt.turns_cut
        judgment = CaseJudgment(status="ok", scores=scores, **self._common(call, start), **base)
        return judgment, prompt.turns_cut

    def _request(self, conversation: list[dict[str, str]], call: CallStats) -> ChatReply:
        if self._config.response_format == "json_schema":
            reply = self._endpoint.send(conversation, call, self._strict)
        else:
            reply = self._endpoint.send_preferred(
                conversation,
                call,
                [(self._json_schema, self._strict), (self._inline_schema, self._inline)],
                self._object,
            )
        call.raw = reply.choices[0].message.content if reply.choices else None
        return reply

    def _common(self, call: CallStats, start: float) -> dict[str, Any]:
        cfg = self._config
        return {
            "judge": self._name,
            "kind": "openai",
            "model": cfg.model,
            "role": self._role,
            "raw_output": call.raw,
            "attempts": call.requests,
            "input_tokens": call.input_tokens,
            "output_tokens": call.output_tokens,
            "cost_usd": call.cost_usd(cfg),
            "latency_seconds": max(0.0, self._clock.monotonic() - start),
        }

    def _failed(
        self, call: CallStats, start: float, base: dict[str, str], reason: str, detail: str
    ) -> CaseJudgment:
        _log.warning("case_judge.failed", judge=self._name, reason=reason, attempts=call.requests)
        return CaseJudgment(
            status="judge_failed",
            failure_reason=reason,
            failure_detail=self._endpoint.short(detail),
            **self._common(call, start),
            **base,
        )


def _feedback(error: JudgeOutputInvalid) -> str:
    text = str(error)
    if len(text) > _MAX_FEEDBACK_CHARS:
        text = text[: _MAX_FEEDBACK_CHARS - 3] + "..."
    return (
        f"Your previous reply was not valid: {text}\n"
        "Reply again with only the JSON object: resolution_outcome (resolved, partial, "
        "unresolved or handed_off) and the five metric keys, each an object with exactly "
        '"score" (a number from 0 to 1) and "justification" (a non-empty string of at most '
        f"{MAX_JUSTIFICATION_CHARS} characters), no other keys, no code fence."
    )
