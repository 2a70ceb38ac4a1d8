"""One HTTP port for Prometheus and Kubernetes: ``/metrics``, ``/healthz``, ``/readyz``.

- ``/metrics``: the registry in the Prometheus text format or OpenMetrics, negotiated as
  prometheus_client's WSGI app does and rendered by ``monitor.metrics.scrape_body.Exposition`` (the
  same
  bytes at a fraction of the cost, or prometheus_client's own encoder once the fast renderer
  cannot read the library: never a 500 for that); gzip (level 1) when the client accepts it.
  Anything but a plain GET (``name[]`` filters, OPTIONS, other methods) is prometheus_client's
  app itself.
- ``/healthz`` (liveness): the process is alive AND the processing loop ticked recently. A
  loop stuck in a deadlock is not "alive" from the operator's point of view: restart it.
- ``/readyz`` (readiness): every named check (broker, database, ...) passes. Checks are plain
  callables returning bool; an exception counts as a failure. 503 with a JSON body naming the
  failing checks otherwise.

A small threaded WSGI server in a daemon thread: scrapes never wait behind a slow probe, and
closing it (every stop of the daemon) ends its loop at once rather than at its next poll.
"""

from __future__ import annotations

import gzip
import json
import selectors
import socket
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from socketserver import ThreadingMixIn
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import structlog
from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import gzip_accepted

from monitor.metrics.scrape_body import Exposition, negotiate
from monitor.runtime.clock import Clock, SystemClock

log = structlog.get_logger(__name__)

StartResponse = Callable[..., Any]
Environ = dict[str, Any]


class Heartbeat:
    """The processing loop calls ``tick()``; liveness fails when ticks stop for ``max_age``.

    A call that may legitimately block longer (a consumer-group join holds ``poll`` for up to
    max.poll.interval + 5 s during a rebalance) runs inside ``excused(bound)``: until the bound
    passes, a stale tick is not a failure, so Kubernetes does not restart a healthy pod in the
    middle of a rebalance; past it, the loop is stuck after all and liveness fails.
    """

    def __init__(self, max_age_seconds: float = 60.0, clock: Clock | None = None) -> None:
        if max_age_seconds <= 0:
            raise ValueError(f"max_age_seconds must be > 0, got {max_age_seconds}")
        self._clock = clock or SystemClock()
        self._max_age = max_age_seconds
        self._last: float | None = None
        self._excused_until: float | None = None
        self._lock = threading.Lock()

    def tick(self) -> None:
        now = self._clock.monotonic()
        with self._lock:
            self._last = now

    @contextmanager
    def excused(self, bound_seconds: float) -> Iterator[None]:
        """Ticks may stop for up to ``bound_seconds`` from now while inside this block."""
        with self._lock:
            self._excused_until = self._clock.monotonic() + bound_seconds
        try:
            yield
        finally:
            with self._lock:
                self._excused_until = None
            self.tick()

    def status(self) -> tuple[bool, str]:
        with self._lock:
            last = self._last
            excused_until = self._excused_until
        if last is None:
            return False, "processing loop has not started"
        now = self._clock.monotonic()
        age = now - last
        if age > self._max_age and excused_until is not None and now <= excused_until:
            return True, f"waiting on a blocking call (e.g. a group join) for {age:.1f}s"
        if age > self._max_age:
            return False, f"processing loop last ticked {age:.1f}s ago (limit {self._max_age}s)"
        return True, "ok"


def _run_checks(checks: Mapping[str, Callable[[], bool]]) -> dict[str, bool]:
    results: dict[str, bool] = {}
    for name, check in checks.items():
        try:
            results[name] = bool(check())
        except Exception:  # a probe must answer, whatever the check raises
            log.warning("readiness check raised", check=name, exc_info=True)
            results[name] = False
    return results


class ProbeApp:
    """The WSGI application behind the port (usable on its own with any WSGI server)."""

    def __init__(
        self,
        registry: CollectorRegistry,
        heartbeat: Heartbeat,
        checks: Mapping[str, Callable[[], bool]],
        details: Callable[[], Mapping[str, Any]] | None = None,
        on_exposition_fallback: Callable[[str], None] | None = None,
    ) -> None:
        """``on_exposition_fallback``: told once why ``/metrics`` left its fast renderer for
        prometheus_client's own (``Exposition``); the runner counts it."""
        self._details = details  # more for the /readyz body (e.g. which partition is stuck)
        self._metrics_app = make_wsgi_app(registry)
        self._exposition = Exposition(registry, on_exposition_fallback)
        self._heartbeat = heartbeat
        self._checks = dict(checks)

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/metrics":
            return self._metrics(environ, start_response)
        if path == "/healthz":
            ok, reason = self._heartbeat.status()
            return _json(start_response, ok, {"alive": ok, "reason": reason})
        if path == "/readyz":
            results = _run_checks(self._checks)
            failing = sorted(n for n, ok in results.items() if not ok)
            body: dict[str, Any] = {"ready": not failing, "checks": results}
            if failing:
                body["reason"] = f"not ready: {', '.join(failing)}"
            if self._details is not None:
                body.update(self._details())
            return _json(start_response, not failing, body)
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [b"not found: try /metrics, /healthz or /readyz\n"]

    def _metrics(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "GET" or "name[]" in parse_qs(
            environ.get("QUERY_STRING", "")
        ):
            result: Iterable[bytes] = self._metrics_app(environ, start_response)
            return result
        fmt = negotiate(environ.get("HTTP_ACCEPT"))
        body = self._exposition.render(fmt)
        headers = [("Content-Type", fmt.content_type)]
        if gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING", "")):
            # Level 1, not prometheus_client's 9: at the full label set (2.7 MB) it costs ~11x
            # less CPU for ~35 % more bytes (bench/scrape.py); Prometheus sees the same text.
            body = gzip.compress(body, compresslevel=1)
            headers.append(("Content-Encoding", "gzip"))
        start_response("200 OK", headers)
        return [body]


def _json(start_response: StartResponse, ok: bool, body: Mapping[str, Any]) -> list[bytes]:
    raw = json.dumps(body, sort_keys=True).encode()
    status = "200 OK" if ok else "503 Service Unavailable"
    start_response(
        status, [("Content-Type", "application/json"), ("Content-Length", str(len(raw)))]
    )
    return [raw]


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    """Serves until ``wake()``, which ends the loop at once: ``serve_forever`` would notice a
    ``shutdown()`` only at its next poll, up to half a second later, and every stop of the
    daemon would wait for it."""

    daemon_threads = True
    timeout = 0.0  # handle_request() runs once a connection is waiting: never wait in it

    def __init__(
        self,
        server_address: tuple[str, int],
        handler_class: type[WSGIRequestHandler],
        bind_and_activate: bool = True,
    ) -> None:
        # First: a failed bind closes the server, these with it (server_close below).
        self._wake_read, self._wake_write = socket.socketpair()
        super().__init__(server_address, handler_class, bind_and_activate)

    def serve(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self, selectors.EVENT_READ)
            selector.register(self._wake_read, selectors.EVENT_READ)
            while True:
                for key, _ in selector.select():
                    if key.fileobj is self._wake_read:
                        return
                    self.handle_request()  # a thread per request: never long
                self.service_actions()

    def wake(self) -> None:
        self._wake_write.send(b"\0")

    def server_close(self) -> None:
        super().server_close()
        self._wake_read.close()
        self._wake_write.close()


class _QuietHandler(WSGIRequestHandler):
    # Every scrape would otherwise print an access-log line to stderr.
    def log_message(self, format: str, *args: Any) -> None:
        return


class ProbeServer:
    """Serves a ``ProbeApp`` on host:port from a background thread. Port 0 picks a free port."""

    def __init__(self, app: ProbeApp, host: str = "127.0.0.1", port: int = 0) -> None:
        self._server = make_server(
            host, port, app, server_class=_ThreadingServer, handler_class=_QuietHandler
        )
        self._thread = threading.Thread(
            target=self._server.serve, name="casewatch-http", daemon=True
        )

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> ProbeServer:
        self._thread.start()
        log.info("http server listening", url=self.url)
        return self

    def close(self) -> None:
        """Stops serving and releases the port; returns as soon as the serving loop has ended,
        which it does at once (requests under way finish on their own daemon threads)."""
        if self._thread.is_alive():
            self._server.wake()
            # The loop's thread watches the listening socket: it is closed only once that
            # thread is done with it (the bound is for a loop that failed to wake).
            self._thread.join(timeout=5)
        self._server.server_close()

    def __enter__(self) -> ProbeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
