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
``case_data_of(request)`` gives back the turn data of a judge prompt, for responders that
score by content. Reply factories live in ``tests/fake_judge_replies.py``, re-exported here.

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
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

# Re-exported: tests import the server and its replies from this one module.
from tests.fake_judge_replies import (
    Reply,
    Responder,
    ScriptEntry,
    auth_error,
    case_data_of,
    content,
    default_responder,
    disconnect,
    extra_keys,
    gold_answer_grader,
    http_error,
    is_decision_request,
    keyword_grader,
    llama_cpp_rejects_json_schema,
    loading_model,
    malformed,
    missing_metric,
    out_of_range,
    pair_data_of,
    pairwise,
    rate_limited,
    reject_inline_schema,
    reject_json_schema,
    render_completion,
    response_format_type,
    rubric_data_of,
    rubric_grade,
    rubric_questions,
    score_document,
    scores,
    server_error,
    slow,
    truncated,
    with_logprobs,
)

__all__ = [
    "FakeJudgeServer",
    "Reply",
    "Responder",
    "ScriptEntry",
    "auth_error",
    "case_data_of",
    "content",
    "default_responder",
    "disconnect",
    "extra_keys",
    "gold_answer_grader",
    "http_error",
    "is_decision_request",
    "keyword_grader",
    "llama_cpp_rejects_json_schema",
    "loading_model",
    "malformed",
    "missing_metric",
    "out_of_range",
    "pair_data_of",
    "pairwise",
    "rate_limited",
    "reject_inline_schema",
    "reject_json_schema",
    "response_format_type",
    "rubric_data_of",
    "rubric_grade",
    "rubric_questions",
    "score_document",
    "scores",
    "server_error",
    "slow",
    "truncated",
    "with_logprobs",
]


class _HTTPServer(ThreadingHTTPServer):
    # Daemon handler threads never keep a test run alive; ThreadingMixIn does not join daemon
    # threads on server_close, so the server tracks and joins its handlers itself.
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256  # many pooled clients connect at once; 5 would drop SYNs

    def __init__(self, address: tuple[str, int], fake: FakeJudgeServer) -> None:
        self.fake = fake
        self._conns: set[socket.socket] = set()
        self._handlers: set[threading.Thread] = set()
        self._track_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        handler = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name="fake-judge-handler",
            daemon=True,
        )
        with self._track_lock:
            self._conns.add(request)
            # Forget finished handlers here, not from inside them: close() must join every
            # thread that has not fully exited yet.
            self._handlers = {t for t in self._handlers if t.is_alive()}
            self._handlers.add(handler)
        handler.start()

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._track_lock:
                self._conns.discard(request)

    def stop_handlers(self, timeout: float = 10.0) -> None:
        """Wake handler threads blocked reading idle keep-alive connections, and join them."""
        with self._track_lock:
            conns, handlers = list(self._conns), list(self._handlers)
        for conn in conns:
            with contextlib.suppress(OSError):  # already closed by the client
                conn.shutdown(socket.SHUT_RDWR)
        for handler in handlers:
            handler.join(timeout)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            return  # the client hung up (e.g. it timed out first): expected, not a failure
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms ACK stall
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
        reply = fake._take_reply(request, dict(self.headers.items()), raw)
        # In flight from here until just before the reply is written: a client that sends its
        # next request only after a reply can never be counted twice.
        fake._enter()
        try:
            wait = fake.latency + reply.delay
            stopped = wait > 0 and fake._stopping.wait(wait)
        finally:
            fake._leave()
        if stopped or reply.disconnect:
            self.close_connection = True
            return
        if reply.status == 200 and reply.body is None:
            self._send(200, render_completion(request, reply, fake._next_id()), reply.headers)
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
        self._bodies: list[bytes] = []
        self._count = 0
        self._in_flight = 0
        self._peak_in_flight = 0
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
        httpd.stop_handlers()
        httpd.server_close()
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
    def request_bodies(self) -> list[bytes]:
        """The same requests' bodies as received, byte for byte."""
        with self._lock:
            return list(self._bodies)

    @property
    def request_count(self) -> int:
        with self._lock:
            return self._count

    @property
    def peak_in_flight(self) -> int:
        """The most chat-completion requests it was answering at once."""
        with self._lock:
            return self._peak_in_flight

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self._peak_in_flight = max(self._peak_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self._requests.clear()
            self._headers.clear()
            self._bodies.clear()
            self._count = 0

    def _take_reply(self, request: dict[str, Any], headers: dict[str, str], raw: bytes) -> Reply:
        with self._lock:
            self._count += 1
            if self.record:
                self._requests.append(request)
                self._headers.append({k.lower(): v for k, v in headers.items()})
                self._bodies.append(raw)
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
    parser.add_argument(
        "--rubric-gold",
        metavar="RUBRICS.yaml",
        help="answer rubric grading requests with gold_answer_grader over this rubric set",
    )
    args = parser.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    responder: Responder = lambda _req: scores(args.score)  # noqa: E731
    if args.rubric_gold:
        from pathlib import Path

        from monitor.judging.rubric_set import load_rubric_set

        rubrics = load_rubric_set(Path(args.rubric_gold))
        responder = gold_answer_grader(
            {
                q.question: q.gold_answer
                for e in rubrics.entries
                for q in e.questions
                if q.gold_answer
            }
        )
    server = FakeJudgeServer(
        responder,
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
