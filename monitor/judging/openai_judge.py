"""The judge for any OpenAI-compatible chat-completions endpoint (OpenAI, Azure, vLLM, ...).

One ``judge(turn)`` call is a small state machine over HTTP requests:

- transport failures (429, 5xx, 408, timeouts, connection errors) are retried up to
  ``transport_retries`` times in the whole call, with capped exponential backoff and jitter,
  waiting at least ``Retry-After`` when the endpoint sends it (a Retry-After longer than
  ``backoff_max_seconds`` ends the call as ``rate_limited`` instead of parking a worker);
- a reply that does not validate as ``JudgeScores`` is retried up to ``output_retries`` times
  with the bad reply and the validation errors fed back to the judge;
- with ``response_format: auto``, an endpoint rejecting ``json_schema`` with a 400 is asked
  again at once in JSON mode, and this judge instance stays in JSON mode from then on;
- everything else anticipated ends as a ``judge_failed`` Judgment with a bounded reason.

openai exceptions are translated into ``monitor.errors`` at the request boundary; nothing
above ``_request`` imports an openai error type. Thread-safe: the openai client (one
connection pool) is shared, per-call state lives in a ``_Call`` owned by one thread.
"""

from __future__ import annotations

import email.utils
import random
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import openai
import structlog
from openai.types.chat import ChatCompletionMessageParam
from openai.types.chat.completion_create_params import ResponseFormat

from monitor.clock import Backoff, Clock, SystemClock
from monitor.errors import (
    JudgeError,
    JudgeFatalError,
    JudgeOutputInvalid,
    JudgeTransientError,
    truncate,
)
from monitor.judging.prompt import PROMPT_VERSION, build_messages, prompt_hash
from monitor.judging.schema import SCHEMA_NAME, judge_output_json_schema, parse_judge_output
from monitor.logs import SecretRedactor
from monitor.models import (
    MAX_JUSTIFICATION_CHARS,
    JudgeRole,
    JudgeScores,
    Judgment,
    TurnEvent,
)
from monitor.settings import JudgeConfig

_log = structlog.get_logger("monitor.judging.openai_judge")

# Local servers (vLLM, Ollama, llama.cpp) accept any key, but the client insists on one.
_NO_KEY = "no-key-configured"
_MAX_DETAIL_CHARS = 300
_MAX_FEEDBACK_CHARS = 1500

_JSON_SCHEMA_FORMAT: ResponseFormat = {
    "type": "json_schema",
    "json_schema": {"name": SCHEMA_NAME, "strict": True, "schema": judge_output_json_schema()},
}
_JSON_OBJECT_FORMAT: ResponseFormat = {"type": "json_object"}


@dataclass
class _Call:
    """Bookkeeping of one judge() call; owned by the calling thread."""

    requests: int = 0
    transport_retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    raw: str | None = None


class OpenAIJudge:
    """Scores turns with an OpenAI-compatible chat model (seed 004 prompt, strict JSON)."""

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
        self._clock = clock or SystemClock()
        key = config.resolve_api_key()
        self._redactor = SecretRedactor([key] if key else [])
        self._client = openai.OpenAI(
            api_key=key or _NO_KEY,
            base_url=config.base_url,
            timeout=config.timeout_seconds,
            max_retries=0,  # retries are ours: counted, clock-driven, Retry-After aware
        )
        self._use_json_schema = config.response_format != "json_object"
        self._mode_lock = threading.Lock()
        self._jitter = random.Random()  # noqa: S311 -- backoff jitter, not cryptography
        self._backoff = Backoff(
            config.backoff_initial_seconds, config.backoff_max_seconds, jitter=True
        )

    @property
    def name(self) -> str:
        return self._name

    @property
    def response_mode(self) -> str:
        """The response_format type the next request will use."""
        return "json_schema" if self._use_json_schema else "json_object"

    def close(self) -> None:
        self._client.close()

    # ------------------------------------------------------------------ judging

    def judge(self, turn: TurnEvent) -> Judgment:
        start = self._clock.monotonic()
        messages = build_messages(turn)
        call = _Call()
        base = {"prompt_version": PROMPT_VERSION, "prompt_hash": prompt_hash(messages)}
        try:
            scores = self._score(messages, call)
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

    def _score(self, messages: list[dict[str, str]], call: _Call) -> JudgeScores:
        conversation = messages
        error = JudgeOutputInvalid("no reply")
        for output_try in range(self._config.output_retries + 1):
            raw = self._complete(conversation, call)
            try:
                return parse_judge_output(raw)
            except JudgeOutputInvalid as exc:
                error = exc
                _log.warning(
                    "judge.output_invalid",
                    judge=self._name,
                    attempt=call.requests,
                    output_retry=output_try,
                    retries_left=self._config.output_retries - output_try,
                )
            # Only the latest bad reply is fed back, so retry prompts stay bounded.
            conversation = [
                *messages,
                {"role": "assistant", "content": raw or "(empty reply)"},
                {"role": "user", "content": _feedback(str(error))},
            ]
        raise error

    def _complete(self, conversation: list[dict[str, str]], call: _Call) -> str:
        """One reply's content, retrying transport failures within the call's budget."""
        while True:
            try:
                return self._request(conversation, call)
            except JudgeTransientError as exc:
                delay = self._retry_delay(call.transport_retries, exc.retry_after)
                if call.transport_retries >= self._config.transport_retries or delay is None:
                    raise
                call.transport_retries += 1
                _log.info(
                    "judge.retrying",
                    judge=self._name,
                    attempt=call.requests,
                    reason=exc.reason,
                    delay_seconds=round(delay, 3),
                )
                self._clock.sleep(delay)

    def _request(self, conversation: list[dict[str, str]], call: _Call) -> str:
        """One HTTP request. The only place that sees openai exceptions."""
        json_schema = self._use_json_schema
        call.requests += 1
        try:
            response = self._client.chat.completions.create(
                model=self._config.model,
                messages=cast(list[ChatCompletionMessageParam], conversation),
                temperature=0,
                max_tokens=self._config.max_output_tokens,
                response_format=_JSON_SCHEMA_FORMAT if json_schema else _JSON_OBJECT_FORMAT,
            )
        except openai.APIStatusError as exc:
            if json_schema and self._config.response_format == "auto" and _rejects_schema(exc):
                self._fall_back_to_json_object(exc.status_code)
                return self._request(conversation, call)  # now in JSON mode: recurses once
            raise self._translate(exc) from exc
        except openai.APIError as exc:
            raise self._translate(exc) from exc
        if response.usage is not None:
            call.input_tokens += response.usage.prompt_tokens or 0
            call.output_tokens += response.usage.completion_tokens or 0
        content = response.choices[0].message.content if response.choices else None
        call.raw = content
        return content or ""

    def _fall_back_to_json_object(self, status: int) -> None:
        with self._mode_lock:
            if not self._use_json_schema:
                return  # another thread switched first and logged it
            self._use_json_schema = False
        _log.warning(
            "judge.response_format_fallback",
            judge=self._name,
            status=status,
            detail="endpoint rejected json_schema; using json_object from now on",
        )

    def _translate(self, exc: openai.APIError) -> JudgeError:
        if isinstance(exc, openai.APITimeoutError):
            return JudgeTransientError("judge request timed out", reason="timeout")
        if isinstance(exc, openai.APIConnectionError):
            return JudgeTransientError(
                f"cannot reach the judge endpoint: {self._short(str(exc.__cause__ or exc))}",
                reason="connection",
            )
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            message = f"HTTP {status}: {self._short(exc.message)}"
            retry_after = _retry_after(exc.response.headers)
            if status == 429:
                return JudgeTransientError(message, retry_after, reason="rate_limited")
            if status >= 500 or status == 409:
                return JudgeTransientError(message, retry_after, reason="server_error")
            if status == 408:
                return JudgeTransientError(message, retry_after, reason="timeout")
            if status in (401, 403):
                return JudgeFatalError(message, reason="auth")
            return JudgeFatalError(message, reason="bad_request")
        # A 200 whose body the client could not read as a chat completion.
        return JudgeTransientError(
            f"unreadable response: {self._short(str(exc))}", reason="server_error"
        )

    def _retry_delay(self, retry_index: int, retry_after: float | None) -> float | None:
        """Seconds to wait before the next try; None when the endpoint asks for longer than
        this judge is configured to wait."""
        cfg = self._config
        backoff = self._backoff.delay(retry_index + 1, self._jitter)
        if retry_after is None:
            return backoff
        if retry_after > cfg.backoff_max_seconds:
            return None
        return max(retry_after, backoff)

    # ------------------------------------------------------------------ results

    def _short(self, text: str) -> str:
        text = self._redactor.redact_text(" ".join(text.split()))
        return truncate(text, _MAX_DETAIL_CHARS)

    def _common(self, call: _Call, start: float) -> dict[str, Any]:
        cfg = self._config
        cost = (
            call.input_tokens / 1e6 * cfg.price_input_per_mtok
            + call.output_tokens / 1e6 * cfg.price_output_per_mtok
        )
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


def _feedback(error: str) -> str:
    if len(error) > _MAX_FEEDBACK_CHARS:
        error = error[: _MAX_FEEDBACK_CHARS - 3] + "..."
    return (
        f"Your previous reply was not valid: {error}\n"
        "Reply again with only the JSON object: exactly the eight metric keys, each an object "
        'with exactly "score" (a number from 0 to 1) and "justification" (a non-empty string '
        f"of at most {MAX_JUSTIFICATION_CHARS} characters), no other keys, no code fence."
    )


def _rejects_schema(exc: openai.APIStatusError) -> bool:
    """Whether a 4xx says the endpoint does not support our json_schema response_format."""
    if exc.status_code not in (400, 422):
        return False
    text = f"{exc.message} {exc.body}".lower()
    return "response_format" in text or "json_schema" in text


def _retry_after(headers: Any) -> float | None:
    """Seconds from retry-after-ms, or Retry-After as seconds or an HTTP date."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
