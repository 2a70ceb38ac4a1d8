"""/metrics, /healthz and /readyz over a real socket."""

from __future__ import annotations

import gzip
import http.client
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest

from monitor.jobs.recorders import DriftRecorder
from monitor.metrics.exporter import Metrics
from monitor.metrics.scrape_body import negotiate
from monitor.runtime.clock import ManualClock
from monitor.stream.http import Heartbeat, ProbeApp, ProbeServer
from monitor.stream.recorder import StreamRecorder


def _get(url: str) -> tuple[int, str, str]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=5)
    try:
        conn.request("GET", parts.path)
        resp = conn.getresponse()
        return resp.status, resp.getheader("Content-Type", ""), resp.read().decode()
    finally:
        conn.close()


class _Checks:
    def __init__(self) -> None:
        self.broker = True
        self.database = True

    def db(self) -> bool:
        if self.database is None:
            raise RuntimeError("boom")
        return self.database


@pytest.fixture
def checks() -> _Checks:
    return _Checks()


@pytest.fixture
def server(clock: ManualClock, checks: _Checks) -> Iterator[tuple[ProbeServer, Heartbeat]]:
    registry = CollectorRegistry()
    StreamRecorder(Metrics(registry)).record_consumed("turns", 4)
    heartbeat = Heartbeat(max_age_seconds=10, clock=clock)
    app = ProbeApp(registry, heartbeat, {"broker": lambda: checks.broker, "database": checks.db})
    with ProbeServer(app, "127.0.0.1", 0) as srv:
        yield srv, heartbeat


def test_metrics_endpoint(server: tuple[ProbeServer, Heartbeat]) -> None:
    srv, _ = server
    status, ctype, body = _get(f"{srv.url}/metrics")
    assert status == 200
    assert ctype.startswith("text/plain")
    assert 'casewatch_turns_consumed_total{topic="turns"} 4.0' in body


def test_healthz_follows_the_loop_ticks(
    server: tuple[ProbeServer, Heartbeat], clock: ManualClock
) -> None:
    srv, heartbeat = server
    status, _, body = _get(f"{srv.url}/healthz")
    assert status == 503
    assert "not started" in json.loads(body)["reason"]
    heartbeat.tick()
    status, ctype, body = _get(f"{srv.url}/healthz")
    assert (status, ctype) == (200, "application/json")
    assert json.loads(body)["alive"] is True
    clock.advance(11)
    status, _, body = _get(f"{srv.url}/healthz")
    assert status == 503
    assert "last ticked 11.0s ago" in json.loads(body)["reason"]


def test_readyz_names_failing_checks(
    server: tuple[ProbeServer, Heartbeat], checks: _Checks
) -> None:
    srv, _ = server
    status, _, body = _get(f"{srv.url}/readyz")
    assert status == 200
    assert json.loads(body) == {"ready": True, "checks": {"broker": True, "database": True}}
    checks.database = False
    status, _, body = _get(f"{srv.url}/readyz")
    doc = json.loads(body)
    assert status == 503
    assert doc["checks"] == {"broker": True, "database": False}
    assert doc["reason"] == "not ready: database"


def test_readyz_check_that_raises_counts_as_failing(
    server: tuple[ProbeServer, Heartbeat], checks: _Checks
) -> None:
    srv, _ = server
    checks.database = None  # type: ignore[assignment]
    checks.broker = False
    status, _, body = _get(f"{srv.url}/readyz")
    assert status == 503
    assert json.loads(body)["reason"] == "not ready: broker, database"


def test_unknown_path_is_404(server: tuple[ProbeServer, Heartbeat]) -> None:
    srv, _ = server
    status, _, body = _get(f"{srv.url}/nope")
    assert status == 404
    assert "/metrics" in body


def test_close_without_start_does_not_hang() -> None:
    app = ProbeApp(CollectorRegistry(), Heartbeat(), {})
    ProbeServer(app).close()


def test_a_closed_server_has_released_its_port_for_the_next_one() -> None:
    """Closing ends the serving loop and closes the listening socket before it returns: the
    port refuses connections, and a server started again on it serves."""
    app = ProbeApp(CollectorRegistry(), Heartbeat(), {})
    with ProbeServer(app, "127.0.0.1", 0) as first:
        port = first.port
        assert _get(f"{first.url}/metrics")[0] == 200
    with pytest.raises(ConnectionRefusedError):
        _get(f"http://127.0.0.1:{port}/metrics")
    with ProbeServer(app, "127.0.0.1", port) as second:
        assert _get(f"{second.url}/metrics")[0] == 200


def test_heartbeat_rejects_bad_age() -> None:
    with pytest.raises(ValueError, match="max_age_seconds"):
        Heartbeat(0)


def _request(url: str, headers: dict[str, str], method: str = "GET") -> tuple[int, Any, bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=5)
    try:
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        conn.request(method, path, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


@pytest.fixture
def busy_server() -> Iterator[tuple[ProbeServer, CollectorRegistry]]:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    stream = StreamRecorder(metrics)
    stream.record_consumed("turns", 4)
    stream.record_tripwire('quote"d\nname', checked=3)
    metrics.judge_latency.labels("primary-a").observe(1e9)
    DriftRecorder(metrics).record_drift_signal(
        "a", "s_final", q_value=None, effect=0.5, detected=False
    )
    with ProbeServer(ProbeApp(registry, Heartbeat(), {}), "127.0.0.1", 0) as srv:
        yield srv, registry


def test_metrics_negotiates_openmetrics_and_gzip_as_prometheus_client(
    busy_server: tuple[ProbeServer, CollectorRegistry],
) -> None:
    srv, registry = busy_server
    accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
    status, headers, body = _request(
        f"{srv.url}/metrics", {"Accept": accept, "Accept-Encoding": "gzip"}
    )
    assert status == 200
    assert headers["Content-Encoding"] == "gzip"
    fmt = negotiate(accept)
    assert headers["Content-Type"] == fmt.content_type
    assert fmt.openmetrics
    assert gzip.decompress(body) == openmetrics_latest(registry)


def test_metrics_without_accept_is_the_plain_text_format(
    busy_server: tuple[ProbeServer, CollectorRegistry],
) -> None:
    srv, registry = busy_server
    status, headers, body = _request(f"{srv.url}/metrics", {})
    assert status == 200
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "Content-Encoding" not in headers
    assert body == generate_latest(registry)


def test_metrics_name_filter_and_other_methods_are_prometheus_clients(
    busy_server: tuple[ProbeServer, CollectorRegistry],
) -> None:
    srv, _ = busy_server
    status, _, body = _request(f"{srv.url}/metrics?name[]=casewatch_turns_consumed_total", {})
    assert status == 200
    assert body.decode().splitlines()[-1] == 'casewatch_turns_consumed_total{topic="turns"} 4.0'
    assert b"casewatch_in_flight" not in body
    status, headers, _ = _request(f"{srv.url}/metrics", {}, method="POST")
    assert status == 405
    assert headers["Allow"] == "OPTIONS,GET"
