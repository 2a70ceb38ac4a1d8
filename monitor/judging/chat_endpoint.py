"""One OpenAI-compatible chat-completions endpoint: client, retries and error translation.

Shared by every judge that talks to such an endpoint (the case-aware ``OpenAIJudge`` and the
pairwise judge), so there is one client construction, one retry loop and one translation:

- the ``openai`` client is built with our timeout and ``max_retries=0`` (retries are ours:
  counted, clock-driven, Retry-After aware);
- ``send`` makes one request; openai exceptions become ``monitor.errors`` here (``raise ...
  from exc``, so an adapter needing the status, e.g. a json_schema rejection, finds it in
  ``__cause__``);
- ``with_retries`` retries transient failures (429, 5xx, 408, timeouts, connection errors) up
  to ``transport_retries`` times per call with capped exponential backoff and jitter from
  ``monitor.clock.Backoff``, waiting at least ``Retry-After``; a Retry-After longer than
  ``backoff_max_seconds`` ends the call as ``rate_limited`` instead of parking a worker.

Thread-safe: the client (one connection pool) is shared, per-call state lives in a
``CallStats`` owned by one thread.
"""

from __future__ import annotations

import email.utils
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

import openai
import structlog
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

from monitor.clock import Backoff, Clock, SystemClock
from monitor.errors import JudgeError, JudgeFatalError, JudgeTransientError, truncate
from monitor.logs import SecretRedactor
from monitor.settings import JudgeConfig

_log = structlog.get_logger("monitor.judging.chat_endpoint")

# Local servers (vLLM, Ollama, llama.cpp) accept any key, but the client insists on one.
_NO_KEY = "no-key-configured"
_MAX_DETAIL_CHARS = 300

T = TypeVar("T")


@dataclass
class CallStats:
    """Bookkeeping of one logical judge call (all its requests); owned by one thread."""

    requests: int = 0
    transport_retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    raw: str | None = None

    def cost_usd(self, config: JudgeConfig) -> float:
        return (
            self.input_tokens / 1e6 * config.price_input_per_mtok
            + self.output_tokens / 1e6 * config.price_output_per_mtok
        )


class ChatEndpoint:
    def __init__(self, name: str, config: JudgeConfig, *, clock: Clock | None = None) -> None:
        self.name = name
        self.config = config
        self.clock = clock or SystemClock()
        key = config.resolve_api_key()
        self._redactor = SecretRedactor([key] if key else [])
        self._client = openai.OpenAI(
            api_key=key or _NO_KEY,
            base_url=config.base_url,
            timeout=config.timeout_seconds,
            max_retries=0,  # retries are ours: counted, clock-driven, Retry-After aware
        )
        self._jitter = random.Random()  # noqa: S311 -- backoff jitter, not cryptography
        self._backoff = Backoff(
            config.backoff_initial_seconds, config.backoff_max_seconds, jitter=True
        )

    def close(self) -> None:
        self._client.close()

    def send(
        self, conversation: list[dict[str, str]], call: CallStats, **params: Any
    ) -> ChatCompletion:
        """One HTTP request (``model`` and ``messages`` filled in). The only place that sees
        openai exceptions; token usage is added to ``call``."""
        call.requests += 1
        try:
            response: ChatCompletion = self._client.chat.completions.create(
                model=self.config.model,
                messages=cast(list[ChatCompletionMessageParam], conversation),
                **params,
            )
        except openai.APIError as exc:
            raise self.translate(exc) from exc
        if response.usage is not None:
            call.input_tokens += response.usage.prompt_tokens or 0
            call.output_tokens += response.usage.completion_tokens or 0
        return response

    def with_retries(self, attempt: Callable[[], T], call: CallStats) -> T:
        """``attempt()``, retried on JudgeTransientError within the call's budget."""
        while True:
            try:
                return attempt()
            except JudgeTransientError as exc:
                delay = self.retry_delay(call.transport_retries, exc.retry_after)
                if call.transport_retries >= self.config.transport_retries or delay is None:
                    raise
                call.transport_retries += 1
                _log.info(
                    "judge.retrying",
                    judge=self.name,
                    attempt=call.requests,
                    reason=exc.reason,
                    delay_seconds=round(delay, 3),
                )
                self.clock.sleep(delay)

    def translate(self, exc: openai.APIError) -> JudgeError:
        if isinstance(exc, openai.APITimeoutError):
            return JudgeTransientError("judge request timed out", reason="timeout")
        if isinstance(exc, openai.APIConnectionError):
            return JudgeTransientError(
                f"cannot reach the judge endpoint: {self.short(str(exc.__cause__ or exc))}",
                reason="connection",
            )
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            message = f"HTTP {status}: {self.short(exc.message)}"
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
            f"unreadable response: {self.short(str(exc))}", reason="server_error"
        )

    def retry_delay(self, retry_index: int, retry_after: float | None) -> float | None:
        """Seconds to wait before the next try; None when the endpoint asks for longer than
        this judge is configured to wait."""
        backoff = self._backoff.delay(retry_index + 1, self._jitter)
        if retry_after is None:
            return backoff
        if retry_after > self.config.backoff_max_seconds:
            return None
        return max(retry_after, backoff)

    def short(self, text: str) -> str:
        """``text`` on one line, secrets redacted, at most a few hundred characters."""
        text = self._redactor.redact_text(" ".join(text.split()))
        return truncate(text, _MAX_DETAIL_CHARS)


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


__all__ = ["CallStats", "ChatEndpoint"]
