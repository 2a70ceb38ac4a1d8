"""Readiness for /readyz: broker and database probes, run by the daemon's loop and cached.

The probes are network calls (a metadata request, a ``SELECT 1``), so they run every
``interval_s`` rather than every tick, and always on the loop's thread: the Kafka consumer is
not thread-safe, and a scrape must never wait on a database connect timeout.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from consumers.records import TopicPartition
from consumers.unreadable import UnreadableBatch
from monitor.runtime.clock import Clock

STATUS_INTERVAL_S = 5.0


class Pingable(Protocol):
    def ping(self) -> bool: ...


class Readiness:
    def __init__(
        self,
        broker: Pingable,
        database: Pingable,
        writes_ok: Callable[[], bool],
        clock: Clock,
        interval_s: float = STATUS_INTERVAL_S,
        stuck: Callable[[], Mapping[TopicPartition, UnreadableBatch]] | None = None,
    ) -> None:
        self._broker = broker
        self._database = database
        self._writes_ok = writes_ok
        self._clock = clock
        self._interval = interval_s
        self._broker_ok = False
        self._db_ok = False
        self._next = 0.0
        self._stuck = stuck  # thread-safe snapshot of partitions held on unreadable batches

    def update(self) -> None:
        """Probe again if the interval has passed (called on every loop tick)."""
        now = self._clock.monotonic()
        if now >= self._next:
            self._next = now + self._interval
            self._broker_ok = self._broker.ping()
            self._db_ok = self._database.ping()

    def broker_failed(self) -> None:
        """A broker call of the loop failed: unready now, not at the next probe."""
        self._broker_ok = False

    def checks(self) -> dict[str, Callable[[], bool]]:
        checks: dict[str, Callable[[], bool]] = {
            "broker": lambda: self._broker_ok,
            # A database that answers pings but refuses verdict writes is not ready either.
            "database": lambda: self._db_ok and self._writes_ok(),
        }
        stuck = self._stuck
        if stuck is not None:
            # Unready while a partition cannot be read: a rollout of an image that
            # cannot read its partitions stops here, and the body says which and why.
            checks["partitions"] = lambda: not stuck()
        return checks

    def details(self) -> dict[str, list[str]]:
        """What /readyz adds to its body: the partitions held on an unreadable batch."""
        stuck = self._stuck() if self._stuck is not None else {}
        if not stuck:
            return {}
        return {"unreadable_partitions": sorted(b.describe() for b in stuck.values())}
