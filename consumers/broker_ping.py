"""Whether the brokers are reachable, for ``/readyz``: a TCP connect to a bootstrap server,
its answer kept for ``PING_CACHE_S`` (the probe may be scraped every second)."""

from __future__ import annotations

import time

from consumers._kafka import any_reachable

PING_CACHE_S = 2.0
PING_CONNECT_TIMEOUT_S = 1.0


class BrokerPing:
    def __init__(self, servers: list[str]) -> None:
        self._servers = servers
        self._last: tuple[float, bool] | None = None  # (when, answer)

    def __call__(self) -> bool:
        now = time.monotonic()
        last = self._last
        if last is not None and now - last[0] < PING_CACHE_S:
            return last[1]
        ok = any_reachable(self._servers, PING_CONNECT_TIMEOUT_S)
        self._last = (now, ok)
        return ok
