"""HTTP to one endpoint through the ``openai`` client: the transport under ``ChatEndpoint``.

One client stack and one translation of HTTP failures for every outbound call casewatch makes:
the judges' chat requests (``ChatEndpoint`` adds retries, optional request parameters and the
retry-with-feedback loop on top) and an assistant's probes (``monitor.jobs.assistant_client``,
which asks once per run and needs none of that).

- each calling thread gets its own ``openai`` client (one keep-alive connection pool per
  thread), built with our timeout and ``max_retries=0``: retries, where there are any, are the
  caller's. One client shared by 32 judge threads spent most of its time in httpcore's pool
  lock: every request and every response close takes it, and under GIL contention its holder
  is descheduled while the others queue behind it (bench/README.md, "judging.py"; 0.72 of the
  ideal throughput with a shared client, 0.86 with a client per thread, same run). The calling
  threads are a fixed pool, so the clients are as many as the configured concurrency and are
  all closed by ``close``;
- ``chat`` and ``post_json`` make one request each; openai exceptions become
  ``monitor.errors`` here (``raise ... from exc``, so a caller needing the status, e.g. a
  json_schema rejection, finds it in ``__cause__``).
"""

from __future__ import annotations

import email.utils
import ssl
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx2
import openai
import pydantic
from openai import RequestOptions

from monitor.config.judges import JudgeConfig
from monitor.errors import (
    JudgeError,
    JudgeFatalError,
    JudgeTransientError,
    UnreadableResponse,
    truncate,
)
from monitor.judging.chat_reply import ChatReply, RequestParams, encode_body
from monitor.runtime.logs import SecretRedactor

# Local servers (vLLM, Ollama, llama.cpp) accept any key, but the client insists on one.
NO_KEY = "no-key-configured"
_MAX_DETAIL_CHARS = 300


_tls_lock = threading.Lock()
_tls: ssl.SSLContext | None = None


def _tls_context() -> ssl.SSLContext:
    """The process's one TLS context, built on the first request. Building one loads the CA
    certificates: ~80 ms of CPU and ~0.8 MB that glibc keeps even once it is freed, so a
    context per transport (the stream's judges, the preflight, each job's judges) cost the
    daemon a few MB at start for endpoints it may never call. A context only verifies and is
    safe to share between threads and clients; every transport built it the same way."""
    global _tls
    with _tls_lock:
        if _tls is None:
            _tls = httpx2.create_ssl_context()
        return _tls


@dataclass(frozen=True)
class TransportConfig:
    """Where and how to reach one endpoint. ``api_key``: resolved by the caller (from the
    environment or a file, once). Without a key a placeholder bearer token is sent (local judge
    servers want one, whatever it is), or, with ``anonymous``, no Authorization header at all
    (any other JSON API). ``headers``: sent with every request (an assistant endpoint's own)."""

    base_url: str | None
    timeout_seconds: float
    api_key: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    anonymous: bool = False


@dataclass
class CallStats:
    """Bookkeeping of one logical call (all its requests); owned by one thread."""

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


class HttpTransport:
    def __init__(self, config: TransportConfig) -> None:
        self.config = config
        key = config.api_key
        self._redactor = SecretRedactor([key] if key else [])
        self._key = key or NO_KEY
        self._headers = dict(config.headers)
        # Per request: the client only accepts an omitted Authorization among those.
        self._options: RequestOptions = (
            {"headers": {"Authorization": openai.omit}} if key is None and config.anonymous else {}
        )
        self._local = threading.local()
        # The openai client leaves the HTTP client passed in (ours, for the shared TLS
        # context) open when collected: whoever builds a transport closes it (the judges, the
        # assistant client, and in turn the evaluator, the jobs and the commands owning them).
        self._clients: dict[threading.Thread, openai.OpenAI] = {}
        self._clients_lock = threading.Lock()
        self._closed = False

    def client(self) -> openai.OpenAI:
        """This thread's client."""
        client: openai.OpenAI | None = getattr(self._local, "client", None)
        if client is not None:
            return client
        client = openai.OpenAI(
            api_key=self._key,
            base_url=self.config.base_url,
            timeout=self.config.timeout_seconds,
            max_retries=0,  # retries are the caller's: counted, clock-driven, Retry-After aware
            http_client=openai.DefaultHttpxClient(verify=_tls_context()),
            default_headers=self._headers or None,
        )
        with self._clients_lock:
            if self._closed:
                client.close()
                raise JudgeFatalError("the endpoint was closed", reason="connection")
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

    def chat(
        self,
        model_member: bytes,
        conversation: list[dict[str, str]],
        params: RequestParams,
        call: CallStats,
    ) -> ChatReply:
        """One chat-completions request (``model_member``: ``chat_reply.encode_model``'s);
        token usage is added to ``call``.

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
        body = encode_body(model_member, conversation, params)
        try:
            http = self.client().post(
                "/chat/completions", content=body, cast_to=httpx2.Response, options=self._options
            )
        except openai.APIError as exc:
            raise self.translate(exc) from exc
        except RuntimeError as exc:  # the HTTP client's own, once it is closed
            if not self._closed:
                raise
            # close() during the call (a stopping batch run): a failure, not a bug's traceback.
            raise JudgeFatalError("the endpoint was closed", reason="connection") from exc
        try:
            response = ChatReply.model_validate_json(http.content)
        except pydantic.ValidationError as exc:
            # A 200 whose body is not a chat completion: a broken or overloaded proxy, retried.
            detail = self.short(f"{exc.error_count()} errors, first: {exc.errors()[0]['msg']}")
            raise UnreadableResponse(f"unreadable response: {detail}") from exc
        if response.usage is not None:
            call.input_tokens += response.usage.prompt_tokens or 0
            call.output_tokens += response.usage.completion_tokens or 0
        return response

    def post_json(self, url: str, body: Any, call: CallStats) -> bytes:
        """One POST of ``body`` as JSON to ``url`` (absolute); the response body. Errors are
        translated as ``chat``'s."""
        call.requests += 1
        try:
            http = self.client().post(
                url, body=body, cast_to=httpx2.Response, options=self._options
            )
        except openai.APIError as exc:
            raise self.translate(exc) from exc
        return http.content

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
        # A 200 whose body the client could not read.
        return UnreadableResponse(f"unreadable response: {self.short(str(exc))}")

    def short(self, text: str) -> str:
        """``text`` on one line, secrets redacted, at most a few hundred characters."""
        text = self._redactor.redact_text(" ".join(text.split()))
        return truncate(text, _MAX_DETAIL_CHARS)


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


__all__ = ["NO_KEY", "CallStats", "HttpTransport", "TransportConfig"]
