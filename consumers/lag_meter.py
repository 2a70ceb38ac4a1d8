"""Consumer lag per assigned partition, from what the fetches already returned (no request).

Lag is the partition's highwater mark (in every fetch response) minus the consumer's position
(the offset of the next record ``poll()`` returns, kept by kafka-python itself): nothing here
tracks offsets of its own. Recomputed at most every ``refresh_s``; read from any thread.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from consumers._kafka import from_kafka_tp
from consumers.records import TopicPartition
from monitor.runtime.clock import Clock, SystemClock


class LagMeter:
    def __init__(self, refresh_s: float, clock: Clock | None = None) -> None:
        self._refresh_s = refresh_s
        self._clock = clock or SystemClock()
        self._at: float | None = None
        self._lag: dict[TopicPartition, int] = {}
        self._lock = threading.Lock()  # lag() is read by the metrics thread

    def refresh(self, consumer: Any) -> None:
        """Recompute from ``consumer`` (on the thread that owns it) if the last is stale."""
        now = self._clock.monotonic()
        if self._at is not None and now - self._at < self._refresh_s:
            return
        self._at = now
        lag: dict[TopicPartition, int] = {}
        for ktp in consumer.assignment():
            high = consumer.highwater(ktp)
            if high is None:
                continue  # nothing fetched yet
            try:
                position = consumer.position(ktp, timeout_ms=0)
            except Exception:  # best effort: the partition may be mid-rebalance
                position = None
            if position is not None:
                lag[from_kafka_tp(ktp)] = max(0, int(high) - int(position))
        with self._lock:
            self._lag = lag

    def lag(self) -> dict[TopicPartition, int]:
        with self._lock:
            return dict(self._lag)

    def forget(self, tps: Iterable[TopicPartition]) -> None:
        """Partitions no longer ours (revoked, or the consumer replaced)."""
        with self._lock:
            for tp in tps:
                self._lag.pop(tp, None)
