"""One OpenAI-compatible chat-completions endpoint for a judge: retries and the output loop.

Shared by every judge that talks to such an endpoint (the case-aware ``OpenAIJudge`` and the
pairwise judge), so there is one retry loop and one retry-with-feedback loop. The HTTP under it
(a client per thread, one translation of failures into ``monitor.errors``) is
``monitor.judging.http_transport.HttpTransport``, which an assistant's probes use directly:

- ``send`` makes one request through the transport;
- ``with_retries`` retries transient failures (429, 5xx, 408, timeouts, connection errors) up
  to ``transport_retries`` times per call with capped exponential backoff and jitter from
  ``monitor.runtime.clock.Backoff``, waiting at least ``Retry-After``; a Retry-After longer than
  ``backoff_max_seconds`` ends the call as ``rate_limited`` instead of parking a worker;
- ``send_preferred`` sends with the most preferred request option the endpoint has not
  rejected (json_schema output, a schema inside JSON mode, logprobs): the first rejection
  naming one drops it for good (``OptionalParam``), ``send_optional`` is the one-option case;
- ``ask_valid`` is the one retry-with-feedback loop: a reply the caller cannot parse is asked
  again with the bad reply and what was wrong fed back, up to ``output_retries`` times;

Thread-safe: the transport gives each calling thread its own client; per-call state lives in
a ``CallStats`` owned by one thread.
"""

from __future__ import annotations

import functools
import random
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import openai
import structlog

from monitor.config.judges import JudgeConfig
from monitor.errors import (
    JudgeError,
    JudgeOutputInvalid,
    JudgeOutputTruncated,
    JudgeTransientError,
)
from monitor.judging.chat_options import OptionalParam
from monitor.judging.chat_reply import ChatReply, RequestParams, encode_model
from monitor.judging.http_transport import NO_KEY, CallStats, HttpTransport, TransportConfig
from monitor.runtime.clock import Backoff, Clock, SystemClock

_log = structlog.get_logger("monitor.judging.chat_endpoint")

T = TypeVar("T")


class ChatEndpoint:
    def __init__(
        self,
        name: str,
        config: JudgeConfig,
        *,
        clock: Clock | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.clock = clock or SystemClock()
        self.transport = HttpTransport(
            TransportConfig(
                base_url=config.base_url,
                timeout_seconds=config.timeout_seconds,
                api_key=config.resolve_api_key(),
            )
        )
        self._model_member = encode_model(config.model)
        # A server that serves one request at a time (llama-cpp-python holds one lock around
        # its model) queues the others, and that wait counts against the request's timeout:
        # at 8 judge threads, 8 replies' time. Waiting here instead keeps the timeout about
        # one reply, and a stalled server costs a timeout, not every queued turn's.
        limit = config.max_concurrent_requests
        self._slots = threading.BoundedSemaphore(limit) if limit else None
        self._jitter = random.Random()  # noqa: S311 -- backoff jitter, not cryptography
        self._backoff = Backoff(
            config.backoff_initial_seconds, config.backoff_max_seconds, jitter=True
        )

    @property
    def clients(self) -> int:
        """Open clients (one per live thread that has called)."""
        return self.transport.clients

    def close(self) -> None:
        self.transport.close()

    def send(
        self,
        conversation: list[dict[str, str]],
        call: CallStats,
        params: RequestParams | None = None,
        **values: Any,
    ) -> ChatReply:
        """One HTTP request: ``model``, ``messages`` and ``params`` (encoded once by a caller
        that sends the same ones every time) or ``values``; token usage is added to ``call``.
        At most ``max_concurrent_requests`` at once per endpoint (the others wait their turn)."""
        request = params or RequestParams.of(**values)
        if self._slots is None:
            return self.transport.chat(self._model_member, conversation, request, call)
        with self._slots:
            return self.transport.chat(self._model_member, conversation, request, call)

    def send_optional(
        self,
        conversation: list[dict[str, str]],
        call: CallStats,
        option: OptionalParam,
        with_option: RequestParams,
        without: RequestParams,
    ) -> ChatReply:
        """One reply, asking with ``option`` while the endpoint accepts it; a rejection of it
        drops it and asks again at once without (the same call, one more request)."""
        return self.send_preferred(conversation, call, [(option, with_option)], without)

    def send_preferred(
        self,
        conversation: list[dict[str, str]],
        call: CallStats,
        preferred: Sequence[tuple[OptionalParam, RequestParams]],
        last: RequestParams,
    ) -> ChatReply:
        """One reply, asking with the first option of ``preferred`` the endpoint has not
        rejected, else with ``last``. A rejection drops that option for good and asks at once
        with the next (the same call, one more request each)."""
        for option, params in preferred:
            if not option.enabled:
                continue
            try:
                return self.send(conversation, call, params)
            except JudgeError as exc:
                status = option.rejected_by(exc)
                if status is None:
                    raise
                if option.drop():
                    _log.warning(
                        "judge.option_unsupported",
                        judge=self.name,
                        option=option.name,
                        status=status,
                        detail=f"endpoint rejected {option.name}; not asked for from now on",
                    )
        return self.send(conversation, call, last)

    def ask_valid(
        self,
        messages: list[dict[str, str]],
        call: CallStats,
        request: Callable[[list[dict[str, str]]], ChatReply],
        parse: Callable[[ChatReply], T],
        feedback: Callable[[JudgeOutputInvalid], str],
    ) -> T:
        """``parse(reply)`` of the first reply that parses, each request through
        ``with_retries``. A reply ``parse`` refuses (JudgeOutputInvalid) is asked again with
        only the latest bad reply and ``feedback(error)`` appended, so retry prompts stay
        bounded, up to ``output_retries`` times; then the last error is raised. A refused
        reply the endpoint cut at max_tokens is a ``JudgeOutputTruncated``."""
        conversation = messages
        error = JudgeOutputInvalid("no reply")
        retries = self.config.output_retries
        for output_try in range(retries + 1):
            reply = self.with_retries(functools.partial(request, conversation), call)
            try:
                return parse(reply)
            except JudgeOutputInvalid as exc:
                error = _truncated(exc, reply)
                _log.warning(
                    "judge.output_invalid",
                    judge=self.name,
                    attempt=call.requests,
                    output_retry=output_try,
                    retries_left=retries - output_try,
                )
            conversation = [
                *messages,
                {"role": "assistant", "content": content_of(reply) or "(empty reply)"},
                {"role": "user", "content": feedback(error)},
            ]
        raise error

    def probe(self, timeout_s: float) -> None:
        """One cheap request (``GET /models``) to check the endpoint answers and takes the key,
        before a run commits to it. An endpoint without ``/models`` (404) passes: it answered.
        Raises the ``JudgeError`` a judge call would (``reason`` says which kind)."""
        try:
            self.transport.client().with_options(timeout=timeout_s).models.list()
        except openai.NotFoundError:
            return
        except openai.APIError as exc:
            raise self.transport.translate(exc) from exc

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
        return self.transport.short(text)


def content_of(reply: ChatReply) -> str:
    """The first choice's text ("" when there is none)."""
    if not reply.choices:
        return ""
    return reply.choices[0].message.content or ""


def _truncated(error: JudgeOutputInvalid, reply: ChatReply) -> JudgeOutputInvalid:
    """``error`` as a JudgeOutputTruncated when the endpoint cut the reply at max_tokens: a
    reply that stopped mid-JSON says nothing about the model's grasp of the schema."""
    if isinstance(error, JudgeOutputTruncated) or not reply.choices:
        return error
    if reply.choices[0].finish_reason != "length":
        return error
    truncated = JudgeOutputTruncated(
        f"the reply was cut at max_tokens (finish_reason length): {error}"
    )
    truncated.__cause__ = error
    return truncated


__all__ = ["NO_KEY", "CallStats", "ChatEndpoint", "OptionalParam", "content_of"]
