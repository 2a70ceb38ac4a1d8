"""A fake OpenAI-compatible ``/v1/embeddings`` server, so the real openai client talks HTTP.

A real HTTP/1.1 server on 127.0.0.1 in a background thread (one thread per connection, like
``tests/fake_judge_server.py``). Each text's vector is a deterministic bag of its words hashed
into ``dim`` buckets (a word's bucket +1; words under four letters and a few function words
left out, as a real model gives them little weight): texts that share content words are alike,
so planted failure modes group on these vectors as on real embeddings::

    with FakeEmbeddingsServer(dim=256) as server:
        ...  # point EmbeddingsConfig(base_url=server.base_url, model="fake-embed") at it
        server.requests       # parsed request bodies
        server.status = 503   # every next request answers 503 instead

``close`` stops it; a config pointed at a closed server's port reaches nothing there.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

_WORD = re.compile(r"[^\W\d_]{4,}", re.UNICODE)
_FUNCTION_WORDS = frozenset(
    [
        "that",
        "this",
        "with",
        "from",
        "then",
        "than",
        "were",
        "been",
        "have",
        "kept",
        "after",
        "again",
        "already",
        "about",
        "into",
    ]
)


def vector(text: str, dim: int) -> list[float]:
    """The fake embedding of ``text``: its content words hashed into buckets."""
    out = [0.0] * dim
    for word in _WORD.findall(text.lower()):
        if word in _FUNCTION_WORDS:
            continue
        digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
        out[int.from_bytes(digest, "big") % dim] += 1.0
    if not any(out):
        out[0] = 1.0
    return out


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.split("?")[0] not in ("/v1/embeddings", "/embeddings"):
            self._send(404, {"error": {"message": "not found", "type": "not_found"}})
            return
        request = json.loads(raw)
        fake = self.server.fake
        with fake.lock:
            fake.requests.append(request)
            status = fake.status
        if status != 200:
            self._send(status, {"error": {"message": "unavailable", "type": "server_error"}})
            return
        texts = request["input"]
        texts = [texts] if isinstance(texts, str) else texts
        data = [
            {"object": "embedding", "index": i, "embedding": vector(t, fake.dim)}
            for i, t in enumerate(texts)
        ]
        self._send(
            200,
            {
                "object": "list",
                "data": data,
                "model": request.get("model", "fake-embed"),
                "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
            },
        )

    def _send(self, status: int, body: Mapping[str, Any]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: FakeEmbeddingsServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fake = fake


class FakeEmbeddingsServer:
    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.status = 200
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> FakeEmbeddingsServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
