"""The retention job: delete verdicts (and their turns) stored more than ``retention_days`` ago."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import structlog

from monitor.runtime.clock import Clock, SystemClock
from monitor.storage.retention import purge_older_than
from monitor.storage.store import Store

log = structlog.get_logger(__name__)


class RetentionJob:
    name = "retention"

    def __init__(
        self,
        store: Store,
        retention_days: float,
        clock: Clock | None = None,
        interval_seconds: float = 3600.0,
    ) -> None:
        self._store = store
        self._days = retention_days
        self._clock = clock or SystemClock()
        self.interval_seconds = interval_seconds
        self.last_deleted = 0

    def close(self) -> None:
        pass  # holds nothing beyond the store, which the daemon closes

    def run(self) -> None:
        self.last_deleted = self.run_once()

    def run_once(self) -> int:
        now = datetime.fromtimestamp(self._clock.time(), tz=UTC)
        cutoff = now - timedelta(days=self._days)
        deleted = purge_older_than(self._store, cutoff)
        log.info("retention purge", cutoff=cutoff.isoformat(), deleted=deleted)
        return deleted
