"""A fake OpenAI-compatible chat-completions server, so the real openai client code runs.

A real HTTP/1.1 server with keep-alive on 127.0.0.1 in a background thread (one thread per
connection, as the openai client keeps a pool of persistent connections). It answers
``POST /v1/chat/completions`` (and ``/chat/completions``) with scripted replies::

    with FakeJudgeServer(latency=0.05) as server:
        server.script([malformed(), scores(0.8)])       # next two requests, in order
        server.responder = lambda req: scores(0.2 if req["model"] == "judge-b" else 0.9)
        ...  # point a JudgeConfig at server.base_url
        server.requests                                  # parsed request bodies

Scripted replies are consumed first; then the responder (default: uniform 0.9 scores)
answers. A script entry may itself be a responder (a function of the request body), which is
how ``reject_json_schema()`` answers 400 only to requests that asked for ``json_schema``.

Standalone (benchmarks): ``python -m tests.fake_judge_server --port 0 --latency 0.2`` prints
``base_url=http://127.0.0.1:PORT/v1`` on stdout once listening, and exits on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from monitor.judges.prompt import unfence
from monitor.models import METRICS

# ---------------------------------------------------------------- replies


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP answer.

    With ``status`` 200 and no ``body``, the server wraps ``content`` into a chat completion
    (with ``usage`` and optional ``logprobs``); otherwise ``body`` is sent as the JSON body.
    """

    status: int = 200
    content: str | None = None
    body: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0  # extra seconds before answering, on top of the server latency
    usage: tuple[int, int] | None = None  # (prompt, completion) tokens; None = estimated
    logprobs: list[dict[str, Any]] | None = None  # choices[0].logprobs.content
    finish_reason: str = "stop"
    disconnect: bool = False  # close the connection without answering


Responder = Callable[[dict[str, Any]], Reply]
ScriptEntry = Reply | Responder


def score_document(
    score: float | Mapping[str, float] = 0.9, justification: str | None = None
) -> dict[str, dict[str, Any]]:
    """A valid judge reply as a dict: one uniform score, or a score per metric."""
    doc = {}
    for metric in METRICS:
        value = score if isinstance(score, int | float) else score[metric]
        text = justification or f"{metric}: scored {value} by the fake judge."
        doc[metric] = {"score": value, "justification": text}
    return doc


def content(text: str, **kwargs: Any) -> Reply:
    """A completion whose message content is ``text`` (any string, valid or not)."""
    return Reply(content=text, **kwargs)


def scores(
    score: float | Mapping[str, float] = 0.9,
    justification: str | None = None,
    **kwargs: Any,
) -> Reply:
    """A valid judge reply."""
    return content(json.dumps(score_document(score, justification)), **kwargs)


def malformed(**kwargs: Any) -> Reply:
    """Truncated JSON."""
    return content('{"hallucination": {"score": 0.9, "justification": "cut o', **kwargs)


def missing_metric(metric: str = "resolution_alignment", score: float = 0.9) -> Reply:
    doc = score_document(score)
    del doc[metric]
    return content(json.dumps(doc))


def out_of_range(metric: str = "hallucination", value: float = 1.5) -> Reply:
    doc = score_document(0.9)
    doc[metric]["score"] = value
    return content(json.dumps(doc))


def extra_keys(extra: Mapping[str, Any] | None = None) -> Reply:
    doc: dict[str, Any] = score_document(0.9)
    doc.update(extra or {"overall": {"score": 0.9, "justification": "not a metric"}})
    return content(json.dumps(doc))


def http_error(
    status: int,
    message: str = "error",
    *,
    error_type: str = "server_error",
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    body = {"error": {"message": message, "type": error_type, "param": param, "code": None}}
    return Reply(status=status, body=body, headers=dict(headers or {}))


def rate_limited(retry_after: float | None = 1.0) -> Reply:
    headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
    return http_error(429, "Rate limit reached", error_type="rate_limit_error", headers=headers)


def server_error(status: int = 500) -> Reply:
    return http_error(status, "The server had an error while processing your request.")


def auth_error(message: str = "Incorrect API key provided.") -> Reply:
    return http_error(401, message, error_type="invalid_request_error")


def slow(delay: float, reply: Reply | None = None) -> Reply:
    """``reply`` (default: valid scores) after ``delay`` seconds: a client timeout."""
    return replace(reply or scores(), delay=delay)


def disconnect() -> Reply:
    """Drop the connection without answering: a connection error on the client."""
    return Reply(disconnect=True)


def reject_json_schema(then: Reply | None = None) -> Responder:
    """400 to a request using ``response_format: json_schema``; ``then`` to any other."""
    rejection = http_error(
        400,
        "Invalid parameter: 'response_format' of type 'json_schema' is not supported with "
        "this model.",
        error_type="invalid_request_error",
        param="response_format",
    )

    def respond(request: dict[str, Any]) -> Reply:
        if response_format_type(request) == "json_schema":
            return rejection
        return then or scores()

    return respond


def with_logprobs(
    top_logprobs: Mapping[str, float], token: str | None = None, **kwargs: Any
) -> Reply:
    """A one-token completion (the most likely of ``top_logprobs`` unless ``token``) carrying
    ``choices[0].logprobs.content[0].top_logprobs``, as pairwise decisions read them."""
    chosen = token or max(top_logprobs, key=lambda t: top_logprobs[t])
    top = [
        {"token": t, "logprob": lp, "bytes": list(t.encode())}
        for t, lp in sorted(top_logprobs.items(), key=lambda kv: -kv[1])
    ]
    entry = {
        "token": chosen,
        "logprob": top_logprobs.get(chosen, -9.0),
        "bytes": list(chosen.encode()),
        "top_logprobs": top,
    }
    return Reply(content=chosen, logprobs=[entry], **kwargs)


# ---------------------------------------------------------------- request helpers


def response_format_type(request: Mapping[str, Any]) -> str | None:
    fmt = request.get("response_format")
    return fmt.get("type") if isinstance(fmt, Mapping) else None


def case_data_of(request: Mapping[str, Any]) -> dict[str, Any] | None:
    """The fenced turn data of a judge request (for responders that score by content)."""
    for message in reversed(request.get("messages", [])):
        text = message.get("content")
        if message.get("role") == "user" and isinstance(text, str) and "<untrusted" in text:
            try:
                return unfence(text)
            except ValueError:
                return None
    return None


def default_responder(request: dict[str, Any]) -> Reply:
    return scores(0.9)


# ---------------------------------------------------------------- the server


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # many pooled clients connect at once; 5 would drop SYNs

    def __init__(self, address: tuple[str, int], fake: FakeJudgeServer) -> None:
        self.fake = fake
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conns_lock:
            self._conns.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._conns_lock:
            self._conns.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        """Wake handler threads blocked reading idle keep-alive connections."""
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):  # already closed by the client
                conn.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            return  # the client hung up (e.g. it timed out first): expected, not a failure
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [{"id": "fake-judge", "object": "model"}]})
        else:
            self._send(404, {"error": {"message": "not found", "type": "not_found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.split("?")[0] not in ("/v1/chat/completions", "/chat/completions"):
            self._send(404, {"error": {"message": "not found", "type": "not_found"}})
            return
        try:
            request = json.loads(raw)
        except ValueError:
            self._send(400, {"error": {"message": "body is not JSON", "type": "bad_request"}})
            return
        fake = self.server.fake
        reply = fake._take_reply(request, dict(self.headers.items()))
        wait = fake.latency + reply.delay
        if (wait > 0 and fake._stopping.wait(wait)) or reply.disconnect:
            self.close_connection = True
            return
        if reply.status == 200 and reply.body is None:
            self._send(200, _completion(request, reply, fake._next_id()), reply.headers)
        else:
            self._send(reply.status, dict(reply.body or {}), reply.headers)

    def _send(
        self, status: int, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def _completion(request: Mapping[str, Any], reply: Reply, n: int) -> dict[str, Any]:
    text = reply.content or ""
    if reply.usage is not None:
        prompt_tokens, completion_tokens = reply.usage
    else:  # ~4 characters a token: enough for cost and budget arithmetic
        chars = sum(len(str(m.get("content", ""))) for m in request.get("messages", []))
        prompt_tokens, completion_tokens = chars // 4 + 1, len(text) // 4 + 1
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "finish_reason": reply.finish_reason,
        "logprobs": None if reply.logprobs is None else {"content": reply.logprobs},
    }
    return {
        "id": f"chatcmpl-fake-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "fake-judge"),
        "choices": [choice],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


class FakeJudgeServer:
    """See the module docstring. Thread-safe; usable as a context manager."""

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        latency: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
        record: bool = True,
    ) -> None:
        self.responder: Responder = responder or default_responder
        self.latency = latency
        self.record = record  # off for long benchmarks: bodies are kept in memory
        self._address = (host, port)
        self._lock = threading.Lock()
        self._script: collections.deque[ScriptEntry] = collections.deque()
        self._requests: list[dict[str, Any]] = []
        self._headers: list[dict[str, str]] = []
        self._count = 0
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -------------------------------------------------------------- lifecycle

    def start(self) -> FakeJudgeServer:
        if self._httpd is None:
            self._stopping.clear()
            self._httpd = _HTTPServer(self._address, self)
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.05},
                name="fake-judge-server",
                daemon=True,
            )
            self._thread.start()
        return self

    def close(self) -> None:
        httpd, thread = self._httpd, self._thread
        if httpd is None or thread is None:
            return
        self._stopping.set()  # wakes handlers sleeping out a latency or a slow reply
        httpd.shutdown()
        httpd.drop_connections()
        httpd.server_close()  # joins the handler threads
        thread.join()
        self._httpd = self._thread = None

    def __enter__(self) -> FakeJudgeServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the fake judge server is not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{self._address[0]}:{self.port}/v1"

    # -------------------------------------------------------------- scripting

    def script(self, replies: Iterable[ScriptEntry]) -> None:
        """Queue replies for the next requests, in order, before the responder answers."""
        with self._lock:
            self._script.extend(replies)

    @property
    def pending(self) -> int:
        """Scripted replies not consumed yet."""
        with self._lock:
            return len(self._script)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Parsed bodies of the chat-completion requests received so far (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def request_headers(self) -> list[dict[str, str]]:
        with self._lock:
            return list(self._headers)

    @property
    def request_count(self) -> int:
        with self._lock:
            return self._count

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self._requests.clear()
            self._headers.clear()
            self._count = 0

    def _take_reply(self, request: dict[str, Any], headers: dict[str, str]) -> Reply:
        with self._lock:
            self._count += 1
            if self.record:
                self._requests.append(request)
                self._headers.append({k.lower(): v for k, v in headers.items()})
            entry: ScriptEntry = self._script.popleft() if self._script else self.responder
        return entry if isinstance(entry, Reply) else entry(request)

    def _next_id(self) -> int:
        with self._lock:
            return self._count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fake OpenAI-compatible judge endpoint.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per reply")
    parser.add_argument("--score", type=float, default=0.9, help="uniform score returned")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server = FakeJudgeServer(
        lambda _req: scores(args.score),
        latency=args.latency,
        host=args.host,
        port=args.port,
        record=False,
    )
    with server:
        print(f"base_url={server.base_url}", flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
