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
  ``backoff_max_seconds`` ends the call as ``rate_limited`` instead of parking a worker;
- ``send_optional`` sends with a request option the endpoint may not support (json_schema
  output, logprobs): the first 400/422 naming it drops the option for good (``OptionalParam``);
- ``ask_valid`` is the one retry-with-feedback loop: a reply the caller cannot parse is asked
  again with the bad reply and what was wrong fed back, up to ``output_retries`` times;
- ``post_json`` posts any JSON body to any URL through the same client and translation (an
  assistant's JSON API, ``monitor.jobs.assistant_client``).

Thread-safe: each calling thread gets its own ``openai`` client (one keep-alive connection
pool per thread), per-call state lives in a ``CallStats`` owned by one thread. One client shared
by 32 judge threads spent most of its time in httpcore's pool lock: every request and every
response close takes it, and under GIL contention its holder is descheduled while the others
queue behind it (bench/README.md, "judging.py"; 0.72 of the ideal throughput with a shared
client, 0.86 with a client per thread, same run). The judge threads are a fixed pool, so the
clients are as many as the configured concurrency and are all closed by ``close``.
"""

from __future__ import annotations

import email.utils
import functools
import random
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx2
import openai
import pydantic
import structlog
from openai import RequestOptions

from monitor.clock import Backoff, Clock, SystemClock
from monitor.errors import (
    JudgeError,
    JudgeFatalError,
    JudgeOutputInvalid,
    JudgeTransientError,
    truncate,
)
from monitor.judging.chat_options import OptionalParam
from monitor.judging.chat_reply import ChatReply, RequestParams, encode_body, encode_model
from monitor.logs import SecretRedactor
from monitor.settings import JudgeConfig

_log = structlog.get_logger("monitor.judging.chat_endpoint")

# Local servers (vLLM, Ollama, llama.cpp) accept any key, but the client insists on one.
NO_KEY = "no-key-configured"
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
    def __init__(
        self,
        name: str,
        config: JudgeConfig,
        *,
        clock: Clock | None = None,
        headers: Mapping[str, str] | None = None,
        anonymous: bool = False,
    ) -> None:
        """``headers``: sent with every request (an assistant endpoint's own). Without a key,
        a placeholder bearer token is sent (local judge servers want one, whatever it is),
        or, with ``anonymous``, no Authorization header at all (any other JSON API)."""
        self.name = name
        self.config = config
        self.clock = clock or SystemClock()
        key = config.resolve_api_key()
        self._redactor = SecretRedactor([key] if key else [])
        self._key = key or NO_KEY
        self._headers = dict(headers or {})
        # Per request: the client only accepts an omitted Authorization among those.
        self._options: RequestOptions = (
            {"headers": {"Authorization": openai.omit}} if key is None and anonymous else {}
        )
        self._model_member = encode_model(config.model)
        self._local = threading.local()
        self._clients: dict[threading.Thread, openai.OpenAI] = {}
        # The openai client closes its own default HTTP client when collected; one passed in
        # (ours, for the shared TLS context) it leaves open. Owners that never call close()
        # (a scheduled job's judge lives as long as the process) would then leak sockets.
        self._clients_lock = threading.Lock()
        weakref.finalize(self, _close_all, self._clients, self._clients_lock)
        self._closed = False
        # Building a client loads the CA certificates (~80 ms of CPU here); one TLS context is
        # built once and shared, so a client per thread costs a fraction of a millisecond.
        self._tls = httpx2.create_ssl_context()
        self._jitter = random.Random()  # noqa: S311 -- backoff jitter, not cryptography
        self._backoff = Backoff(
            config.backoff_initial_seconds, config.backoff_max_seconds, jitter=True
        )

    def _client(self) -> openai.OpenAI:
        client: openai.OpenAI | None = getattr(self._local, "client", None)
        if client is not None:
            return client
        client = openai.OpenAI(
            api_key=self._key,
            base_url=self.config.base_url,
            timeout=self.config.timeout_seconds,
            max_retries=0,  # retries are ours: counted, clock-driven, Retry-After aware
            http_client=openai.DefaultHttpxClient(verify=self._tls),
            default_headers=self._headers or None,
        )
        with self._clients_lock:
            if self._closed:
                client.close()
                raise JudgeFatalError("the judge endpoint was closed", reason="connection")
            # Jobs run their calls on short-lived pools: the clients of finished threads are
            # closed here, so there are never more clients than live calling threads.
            for thread, old in list(self._clients.items()):
                if not thread.is_alive():
                    del self._clients[thread]
                    old.close()
            self._clients[threading.current_thread()] = client
        self._local.client = client
        return client

    @property
    def clients(self) -> int:
        """Open clients (one per live thread that has called)."""
        with self._clients_lock:
            return len(self._clients)

    def close(self) -> None:
        with self._clients_lock:
            self._closed = True
        _close_all(self._clients, self._clients_lock)

    def send(
        self,
        conversation: list[dict[str, str]],
        call: CallStats,
        params: RequestParams | None = None,
        **values: Any,
    ) -> ChatReply:
        """One HTTP request: ``model``, ``messages`` and ``params`` (encoded once by a caller
        that sends the same ones every time) or ``values``. The only place that sees openai
        exceptions; token usage is added to ``call``.

        Sent with the client's generic ``post`` (its documented way to call any endpoint)
        rather than ``chat.completions.create``: ``create`` first walks the whole body through
        the SDK's type-driven ``maybe_transform``, which costs ~1.4 ms of CPU per judge request
        here (a long prompt and our JSON schema; openai/openai-python#3616), about 40 % of the
        client's own cost, and does nothing to a body of plain JSON values like ours. The body
        goes as the encoded ``content`` and the reply comes back as the HTTP response, read by
        ``ChatReply`` (see ``monitor.judging.chat_reply`` for why); errors, retries-off and
        timeouts are the client's, as with ``create``.
        """
        call.requests += 1
        body = encode_body(self._model_member, conversation, params or RequestParams.of(**values))
        try:
            http = self._client().post(
                "/chat/completions", content=body, cast_to=httpx2.Response, options=self._options
            )
        except openai.APIError as exc:
            raise self.translate(exc) from exc
        except RuntimeError as exc:
            if not self._closed:
                raise
            # close() during the call (a stopping batch run): a failure, not a bug's traceback.
            raise JudgeFatalError("the judge endpoint was closed", reason="connection") from exc
        try:
            response = ChatReply.model_validate_json(http.content)
        except pydantic.ValidationError as exc:
            # A 200 whose body is not a chat completion: a broken or overloaded proxy, retried.
            detail = self.short(f"{exc.error_count()} errors, first: {exc.errors()[0]['msg']}")
            raise JudgeTransientError(
                f"unreadable response: {detail}", reason="server_error"
            ) from exc
        if response.usage is not None:
            call.input_tokens += response.usage.prompt_tokens or 0
            call.output_tokens += response.usage.completion_tokens or 0
        return response

    def post_json(self, url: str, body: Any, call: CallStats) -> bytes:
        """One POST of ``body`` as JSON to ``url`` (absolute); the response body. Errors are
        translated as ``send``'s."""
        call.requests += 1
        try:
            http = self._client().post(
                url, body=body, cast_to=httpx2.Response, options=self._options
            )
        except openai.APIError as exc:
            raise self.translate(exc) from exc
        return http.content

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
        if option.enabled:
            try:
                return self.send(conversation, call, with_option)
            except JudgeFatalError as exc:
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
        return self.send(conversation, call, without)

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
        bounded, up to ``output_retries`` times; then the last error is raised."""
        conversation = messages
        error = JudgeOutputInvalid("no reply")
        retries = self.config.output_retries
        for output_try in range(retries + 1):
            reply = self.with_retries(functools.partial(request, conversation), call)
            try:
                return parse(reply)
            except JudgeOutputInvalid as exc:
                error = exc
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
            self._client().with_options(timeout=timeout_s).models.list()
        except openai.NotFoundError:
            return
        except openai.APIError as exc:
            raise self.translate(exc) from exc

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


def content_of(reply: ChatReply) -> str:
    """The first choice's text ("" when there is none)."""
    if not reply.choices:
        return ""
    return reply.choices[0].message.content or ""


def _close_all(clients: dict[threading.Thread, openai.OpenAI], lock: threading.Lock) -> None:
    with lock:
        closing = list(clients.values())
        clients.clear()
    for client in closing:
        client.close()


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


__all__ = ["NO_KEY", "CallStats", "ChatEndpoint", "OptionalParam", "content_of"]
