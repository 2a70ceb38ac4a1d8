"""The hourly judge budget: one interface, one unit, for the stream and the scheduled jobs.

The unit is the **judge request**: one HTTP request to a judge endpoint, retries included
(what the endpoint bills), at ``estimated_usd_per_call`` dollars each until the actual spend
is known. Work is admitted by ``reserve(requests)`` (the stream reserves a sampled turn's
requests in ``Sampler.decide``; a job reserves a run's or a turn's before calling) and
corrected by ``settle(reserved, requests, usd)`` once it has run, whatever the outcome: callers
settle in ``finally``, so a failed grading gives back what it did not spend.

Two token buckets cap spend per hour: requests and USD. Each starts full, holds at most one
hour's budget and refills continuously on the injected clock.
"""

from __future__ import annotations

import threading
from typing import Protocol

from monitor.clock import Clock

_HOUR_S = 3600.0
OVER_REQUESTS = "budget_calls"  # refusal reasons: bounded label values (metric contract)
OVER_USD = "budget_usd"


class Budget(Protocol):
    def reserve(self, requests: int) -> str | None:
        """Charge ``requests`` up front; None when admitted, else the refusal reason
        (nothing is charged then)."""
        ...

    def settle(self, reserved: int, requests: int, usd: float) -> None:
        """The actual spend of work admitted by ``reserve(reserved)``."""
        ...


class TokenBucket:
    """``per_hour`` tokens per hour, refilled continuously, at most ``per_hour`` held.

    The level may go negative when actual spend exceeds the up-front charge; it then has to
    refill past zero before anything else is admitted.
    """

    def __init__(self, per_hour: float, clock: Clock) -> None:
        self._capacity = per_hour
        self._rate = per_hour / _HOUR_S
        self._clock = clock
        self._level = per_hour
        self._at = clock.monotonic()

    @property
    def level(self) -> float:
        self._refill()
        return self._level

    def try_take(self, amount: float) -> bool:
        self._refill()
        if self._level <= 0 or self._level < amount:
            return False
        self._level -= amount
        return True

    def adjust(self, delta: float) -> None:
        """Give back (positive) or charge more (negative), never above capacity."""
        self._refill()
        self._level = min(self._capacity, self._level + delta)

    def _refill(self) -> None:
        now = self._clock.monotonic()
        elapsed = max(0.0, now - self._at)
        self._at = now
        self._level = min(self._capacity, self._level + elapsed * self._rate)


class HourlyBudget:
    """The ``Budget`` of one daemon process. Thread-safe: judge threads and jobs settle."""

    def __init__(
        self,
        requests_per_hour: float | None,
        usd_per_hour: float | None,
        usd_per_request: float,
        clock: Clock,
    ) -> None:
        self._usd_per_request = usd_per_request
        self._requests = (
            TokenBucket(requests_per_hour, clock) if requests_per_hour is not None else None
        )
        self._usd = TokenBucket(usd_per_hour, clock) if usd_per_hour is not None else None
        self._lock = threading.Lock()

    def reserve(self, requests: int) -> str | None:
        estimate = self._usd_per_request * requests
        with self._lock:
            if self._requests is not None and self._requests.level < requests:
                return OVER_REQUESTS
            if self._usd is not None and not self._usd.try_take(estimate):
                return OVER_USD
            if self._requests is not None:
                self._requests.try_take(requests)
        return None

    def settle(self, reserved: int, requests: int, usd: float) -> None:
        estimate = self._usd_per_request * reserved
        with self._lock:
            if self._usd is not None:
                self._usd.adjust(estimate - usd)
            if self._requests is not None:
                self._requests.adjust(reserved - requests)

    def levels(self) -> dict[str, float]:
        """Remaining budget per bucket (``calls``: requests; ``usd``), for tests and status."""
        with self._lock:
            levels: dict[str, float] = {}
            if self._requests is not None:
                levels["calls"] = self._requests.level
            if self._usd is not None:
                levels["usd"] = self._usd.level
            return levels


__all__ = ["OVER_REQUESTS", "OVER_USD", "Budget", "HourlyBudget", "TokenBucket"]
