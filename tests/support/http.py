"""Reading a local HTTP endpoint under test (a daemon's probes, a demo's /metrics)."""

from __future__ import annotations

import http.client
import urllib.request


def http_get(port: int, path: str) -> tuple[int, str]:
    """Status and body of ``GET path`` on 127.0.0.1:``port`` (any status, no exception)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def scrape(url: str) -> str:
    """The body of ``url`` (a loopback http URL such as a /metrics endpoint)."""
    with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 -- loopback http URL
        body: bytes = resp.read()
        return body.decode()
