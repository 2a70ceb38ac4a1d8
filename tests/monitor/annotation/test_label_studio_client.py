"""How the Label Studio client words a server that fails: slow (no answer within the timeout),
erroring, answering what is not JSON, refusing the token, or not there. Each is an
``AnnotationServerError`` with the bounded reason the failure counters use. A small local HTTP
server plays the broken server (the real one is in tests/monitor/jobs/test_review_queue.py)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from monitor.annotation.label_studio import LabelStudioClient
from monitor.errors import AnnotationServerError
from tests.fixtures.label_studio import free_port


class _Broken(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        status, body = {
            "/api/projects": (500, b'{"detail": "boom"}'),
            "/api/users": (200, b"<html>not json</html>"),
        }.get(self.path.split("?")[0], (401, b'{"detail": "Invalid token."}'))
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def broken_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Broken)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def silent_server() -> Iterator[str]:
    """Accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


def _reason(call: Any) -> str:
    with pytest.raises(AnnotationServerError) as caught:
        call()
    return caught.value.reason


def test_each_failure_has_its_reason(broken_server: str, silent_server: str) -> None:
    with LabelStudioClient(broken_server, "t0ken") as client:
        assert _reason(lambda: client.find_project("casewatch review")) == "server_error"
        assert _reason(client.user_emails) == "unreadable"
        assert _reason(lambda: client.export(1)) == "refused"
    with LabelStudioClient(silent_server, "t0ken", timeout_s=0.5) as client:
        assert _reason(lambda: client.find_project("casewatch review")) == "timeout"
    with LabelStudioClient(f"http://127.0.0.1:{free_port()}", "t0ken") as client:
        assert _reason(lambda: client.find_project("casewatch review")) == "unreachable"


def test_the_token_is_never_in_an_error(broken_server: str) -> None:
    client = LabelStudioClient(broken_server, "s3cret-token-value")
    with client, pytest.raises(AnnotationServerError) as caught:
        client.export(1)
    assert "s3cret-token-value" not in str(caught.value)
    assert "HTTP 401" in str(caught.value)
