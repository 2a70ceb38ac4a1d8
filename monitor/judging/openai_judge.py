"""The judge for any OpenAI-compatible chat-completions endpoint (OpenAI, Azure, vLLM, ...).

One ``judge(turn)`` call is a small state machine over HTTP requests:

- transport failures (429, 5xx, 408, timeouts, connection errors) are retried up to
  ``transport_retries`` times in the whole call, with capped exponential backoff and jitter,
  waiting at least ``Retry-After`` when the endpoint sends it (a Retry-After longer than
  ``backoff_max_seconds`` ends the call as ``rate_limited`` instead of parking a worker);
- a reply that does not validate as ``JudgeScores`` is retried up to ``output_retries`` times
  with the bad reply and the validation errors fed back to the judge;
- with ``response_format: auto`` the output format is negotiated, most constraining first:
  ``json_schema`` (OpenAI, vLLM, Ollama); then JSON mode carrying the schema,
  ``{"type": "json_object", "schema": ...}`` (llama.cpp's servers, Anyscale, Together: the
  schema becomes a grammar, and a small model that is only told "JSON" echoes its input);
  then plain JSON mode. An endpoint rejecting one (``OptionalParam``: a 400/422 naming it, or
  llama-cpp-python's 500 quoting it) is asked again at once with the next, and this judge
  instance keeps to what was accepted;
- a reply cut at ``max_tokens`` that does not validate is retried like any invalid reply and
  ends as ``truncated`` (raise ``max_output_tokens``), not ``invalid_output``;
- everything else anticipated ends as a ``judge_failed`` Judgment with a bounded reason.

The client, the transport retry loop, the feedback loop, the response-format fallback and the
translation of openai exceptions into ``monitor.errors`` live in
``monitor.judging.chat_endpoint`` (shared with the pairwise judge). Thread-safe:
the endpoint gives each calling thread its own openai client, per-call state lives in a
``_Call`` owned by one thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import structlog
from openai.types.chat.completion_create_params import ResponseFormat

from monitor.config.judges import JudgeConfig
from monitor.errors import (
    JudgeFatalError,
    JudgeOutputInvalid,
    JudgeOutputTruncated,
    JudgeTransientError,
)
from monitor.judging.chat_endpoint import CallStats, ChatEndpoint, OptionalParam, content_of
from monitor.judging.chat_reply import ChatReply, RequestParams
from monitor.judging.prompt import PROMPT_VERSION, build_messages, prompt_hash
from monitor.judging.schema import SCHEMA_NAME, judge_output_json_schema, parse_judge_output
from monitor.runtime.clock import Clock
from monitor.schema.turn import MAX_JUSTIFICATION_CHARS, JudgeRole, JudgeScores, Judgment, TurnEvent

_log = structlog.get_logger("monitor.judging.openai_judge")

_MAX_FEEDBACK_CHARS = 1500

_JSON_OBJECT_FORMAT: ResponseFormat = {"type": "json_object"}


def _schema_formats(name: str, schema: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The two schema-carrying response formats: strict json_schema, and JSON mode with the
    schema inline (llama.cpp's extension; it has no strict-mode subset to respect)."""
    strict = {
        "type": "json_schema",
        "json_schema": {"name": name, "strict": True, "schema": schema},
    }
    return strict, {"type": "json_object", "schema": schema}


@dataclass
class _Call(CallStats):
    """Bookkeeping of one judge() call; owned by the calling thread."""

    # What the schema-carrying modes ask for: the judge's scores, or a caller's schema
    # (``complete``): (json_schema, JSON mode with the schema).
    schema_params: tuple[RequestParams, RequestParams] | None = None


@dataclass(frozen=True)
class Completion:
    """One reply obtained through a judge's transport (``OpenAIJudge.complete``)."""

    content: str
    requests: int
    input_tokens: int
    output_tokens: int
    cost_usd: float


class OpenAIJudge:
    """Scores turns with an OpenAI-compatible chat model (the Case-Aware prompt, strict JSON)."""

    def __init__(
        self,
        name: str,
        config: JudgeConfig,
        role: JudgeRole = "single",
        *,
        clock: Clock | None = None,
    ) -> None:
        self._name = name
        self._config = config
        self._role: JudgeRole = role
        self._endpoint = ChatEndpoint(name, config, clock=clock)
        self._clock = self._endpoint.clock
        # The formats "auto" negotiates, each dropped on the first rejection naming it.
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
        # Encoded once: the schema is half of what encoding a request body costs.
        self._schema_params = self._schema_request(SCHEMA_NAME, judge_output_json_schema())
        self._object_params = self._params(_JSON_OBJECT_FORMAT)

    def _params(self, response_format: ResponseFormat | dict[str, Any]) -> RequestParams:
        return RequestParams.of(
            temperature=0,
            max_tokens=self._config.max_output_tokens,
            response_format=response_format,
        )

    def _schema_request(
        self, name: str, schema: dict[str, Any]
    ) -> tuple[RequestParams, RequestParams]:
        strict, inline = _schema_formats(name, schema)
        return self._params(strict), self._params(inline)

    @property
    def name(self) -> str:
        return self._name

    @property
    def response_mode(self) -> str:
        """The response format the next request will use: json_schema, json_object_schema
        (JSON mode carrying the schema) or json_object."""
        if self._json_schema.enabled:
            return "json_schema"
        return "json_object_schema" if self._inline_schema.enabled else "json_object"

    def close(self) -> None:
        self._endpoint.close()

    # ------------------------------------------------------------------ judging

    def judge(self, turn: TurnEvent) -> Judgment:
        start = self._clock.monotonic()
        messages = build_messages(turn)
        call = _Call()
        base = {"prompt_version": PROMPT_VERSION, "prompt_hash": prompt_hash(messages)}
        try:
            scores = self._score(messages, call)
        except JudgeOutputTruncated as exc:
            return self._failed(call, start, base, "truncated", str(exc))
        except JudgeOutputInvalid as exc:
            return self._failed(call, start, base, "invalid_output", str(exc))
        except (JudgeTransientError, JudgeFatalError) as exc:
            return self._failed(call, start, base, exc.reason, str(exc))
        except Exception as exc:  # a bug must cost one turn, not the worker thread
            _log.exception("judge.internal_error", judge=self._name, attempts=call.requests)
            return self._failed(call, start, base, "internal", type(exc).__name__)
        _log.debug("judge.scored", judge=self._name, attempts=call.requests)
        return Judgment(
            status="ok",
            scores=scores,
            **self._common(call, start),
            **base,
        )

    def complete(
        self, messages: list[dict[str, str]], schema_name: str, schema: dict[str, Any]
    ) -> Completion:
        """One reply to ``messages`` asking for ``schema`` (in the format this judge
        negotiated), through this judge's transport: the same retries, Retry-After
        handling, backoff and error translation as ``judge``. The reply is not validated
        (callers parse it their own way). Raises ``JudgeTransientError`` or
        ``JudgeFatalError`` once the retries are spent."""
        call = _Call(schema_params=self._schema_request(schema_name, schema))
        content = self._complete(messages, call)
        cfg = self._config
        return Completion(
            content=content,
            requests=call.requests,
            input_tokens=call.input_tokens,
            output_tokens=call.output_tokens,
            cost_usd=call.cost_usd(cfg),
        )

    def _score(self, messages: list[dict[str, str]], call: _Call) -> JudgeScores:
        return self._endpoint.ask_valid(
            messages,
            call,
            lambda conversation: self._request(conversation, call),
            lambda reply: parse_judge_output(content_of(reply)),
            _feedback,
        )

    def _complete(self, conversation: list[dict[str, str]], call: _Call) -> str:
        """One reply's content, retrying transport failures within the call's budget."""
        reply = self._endpoint.with_retries(lambda: self._request(conversation, call), call)
        return content_of(reply)

    def _request(self, conversation: list[dict[str, str]], call: _Call) -> ChatReply:
        """One reply in the current response mode (see ``response_mode``)."""
        strict, inline = call.schema_params or self._schema_params
        if self._config.response_format == "json_schema":  # no fallback: a 400 is the answer
            reply = self._endpoint.send(conversation, call, strict)
        else:
            reply = self._endpoint.send_preferred(
                conversation,
                call,
                [(self._json_schema, strict), (self._inline_schema, inline)],
                self._object_params,
            )
        call.raw = reply.choices[0].message.content if reply.choices else None
        return reply

    # ------------------------------------------------------------------ results

    def _short(self, text: str) -> str:
        return self._endpoint.short(text)

    def _common(self, call: _Call, start: float) -> dict[str, Any]:
        cfg = self._config
        cost = call.cost_usd(cfg)
        return {
            "judge": self._name,
            "kind": "openai",
            "model": cfg.model,
            "role": self._role,
            "raw_output": call.raw,
            "attempts": call.requests,
            "input_tokens": call.input_tokens,
            "output_tokens": call.output_tokens,
            "cost_usd": cost,
            "latency_seconds": max(0.0, self._clock.monotonic() - start),
        }

    def _failed(
        self, call: _Call, start: float, base: dict[str, str], reason: str, detail: str
    ) -> Judgment:
        _log.warning(
            "judge.failed",
            judge=self._name,
            model=self._config.model,
            reason=reason,
            attempts=call.requests,
        )
        return Judgment(
            status="judge_failed",
            failure_reason=reason,
            failure_detail=self._short(detail),
            **self._common(call, start),
            **base,
        )


def _feedback(error: JudgeOutputInvalid) -> str:
    text = str(error)
    if len(text) > _MAX_FEEDBACK_CHARS:
        text = text[: _MAX_FEEDBACK_CHARS - 3] + "..."
    shorter = (
        "It was cut off at the length limit: keep every justification to one short sentence.\n"
        if isinstance(error, JudgeOutputTruncated)
        else ""
    )
    return (
        f"Your previous reply was not valid: {text}\n{shorter}"
        "Reply again with only the JSON object: exactly the eight metric keys, each an object "
        'with exactly "score" (a number from 0 to 1) and "justification" (a non-empty string '
        f"of at most {MAX_JUSTIFICATION_CHARS} characters), no other keys, no code fence."
    )
