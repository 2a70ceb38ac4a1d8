"""The hourly judge budget: one interface, one unit, for the stream and the scheduled jobs.

The unit is the **judge request**: one HTTP request to a judge endpoint, retries included
(what the endpoint bills), at ``estimated_usd_per_call`` dollars each until the actual spend
is known. Work is admitted by ``reserve(requests)`` (the stream reserves a sampled turn's
requests in ``Sampler.decide``; a job reserves a run's or a turn's before calling) and
corrected by ``settle(reserved, requests, usd)`` once it has run, whatever the outcome: callers
settle in ``finally``, so a failed grading gives back what it did not spend.

A sampled turn's reservation is a ``Reservation`` (``HourlyBudget.reservation``): it travels
with the turn, on its envelope, through the look-up and judge steps, and whoever finishes or
drops the turn settles it. It settles once: a second settle does nothing, so a path that
might meet a turn twice (a revoke, then the stop) cannot give back twice, and a path that
drops a turn cannot strand what it reserved.

Two token buckets cap spend per hour: requests and USD. Each starts full, holds at most one
hour's budget and refills continuously on the injected clock. A limit of 0 admits nothing.
``HourlyBudget.state`` says, per unit, the limit, what the next reservation is checked against,
what is reserved and not settled, and what was spent in the last hour (the gauges
``casewatch_judge_budget_*``).
"""

from __future__ import annotations

import threading
from typing import NamedTuple, Protocol

from monitor.runtime.clock import Clock

_HOUR_S = 3600.0
_MINUTE_S = 60.0
_MINUTES = 60
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


# Serializes the one check-and-set of every ``Reservation``: a judge thread and the loop's
# thread may both reach a turn (a call finishing as the step closes), and only one may settle.
_SETTLING = threading.Lock()


class Reservation:
    """``requests`` judge requests (and their estimated ``usd``) reserved for one piece of work,
    settled exactly once: the first ``settle``, ``release`` or ``keep`` counts, later ones
    return False and change nothing."""

    __slots__ = ("_budget", "_open", "requests", "usd")

    def __init__(self, budget: Budget, requests: int, usd: float) -> None:
        self._budget = budget
        self.requests = requests
        self.usd = usd
        self._open = True

    @property
    def open(self) -> bool:
        """Not settled yet."""
        return self._open

    def settle(self, requests: int, usd: float) -> bool:
        """The work ran: ``requests`` made, ``usd`` spent. False if already settled."""
        with _SETTLING:
            if not self._open:
                return False
            self._open = False
        self._budget.settle(self.requests, requests, usd)
        return True

    def release(self) -> bool:
        """The work will not run here (dropped, found already done): nothing was spent."""
        return self.settle(0, 0.0)

    def keep(self) -> bool:
        """The work ran but what it spent is unknown: charged as reserved."""
        return self.settle(self.requests, self.usd)


class UnitState(NamedTuple):
    """One unit of the budget (judge requests, or USD) as it stands."""

    limit: float | None  # per hour; None: no limit
    available: float | None  # what the next reservation is checked against; None: no limit
    reserved: float  # reserved and not settled yet
    spent: float  # settled spend in the last hour, by the minute


class _LastHour:
    """Sums of what was spent in the last hour, one slot a minute (bounded, whatever the
    rate): the buckets refill continuously and cannot say what was spent."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._slots = [0.0] * _MINUTES
        self._minute = int(clock.monotonic() // _MINUTE_S)

    def add(self, amount: float) -> None:
        self._advance()
        self._slots[self._minute % _MINUTES] += amount

    def total(self) -> float:
        self._advance()
        return sum(self._slots)

    def _advance(self) -> None:
        minute = int(self._clock.monotonic() // _MINUTE_S)
        if minute <= self._minute:
            return
        for m in range(self._minute + 1, min(minute, self._minute + _MINUTES) + 1):
            self._slots[m % _MINUTES] = 0.0
        self._minute = minute


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
        self._limits = (requests_per_hour, usd_per_hour)
        self._lock = threading.Lock()
        # Reserved and not settled yet, jobs' reservations included: a count of requests (the
        # USD reserved is this times the estimate, so it returns to exactly 0).
        self._reserved = 0
        self._spent_requests = _LastHour(clock)
        self._spent_usd = _LastHour(clock)

    def reserve(self, requests: int) -> str | None:
        estimate = self._usd_per_request * requests
        with self._lock:
            if self._requests is not None and self._requests.level < requests:
                return OVER_REQUESTS
            if self._usd is not None and not self._usd.try_take(estimate):
                return OVER_USD
            if self._requests is not None:
                self._requests.try_take(requests)
            self._reserved += requests
        return None

    def reservation(self, requests: int) -> Reservation | str:
        """``requests`` reserved as a ``Reservation`` to settle once, or the reason the budget
        refuses them (nothing is charged then)."""
        refused = self.reserve(requests)
        if refused is not None:
            return refused
        return Reservation(self, requests, self._usd_per_request * requests)

    def settle(self, reserved: int, requests: int, usd: float) -> None:
        estimate = self._usd_per_request * reserved
        with self._lock:
            if self._usd is not None:
                self._usd.adjust(estimate - usd)
            if self._requests is not None:
                self._requests.adjust(reserved - requests)
            self._reserved -= reserved
            if requests:
                self._spent_requests.add(requests)
            if usd:
                self._spent_usd.add(usd)

    def state(self) -> dict[str, UnitState]:
        """Each unit (``calls``: judge requests; ``usd``) as it stands, for the gauges."""
        with self._lock:
            return {
                "calls": UnitState(
                    self._limits[0],
                    self._requests.level if self._requests is not None else None,
                    float(self._reserved),
                    self._spent_requests.total(),
                ),
                "usd": UnitState(
                    self._limits[1],
                    self._usd.level if self._usd is not None else None,
                    self._reserved * self._usd_per_request,
                    self._spent_usd.total(),
                ),
            }

    def levels(self) -> dict[str, float]:
        """Remaining budget per bucket (``calls``: requests; ``usd``), for tests and status."""
        with self._lock:
            levels: dict[str, float] = {}
            if self._requests is not None:
                levels["calls"] = self._requests.level
            if self._usd is not None:
                levels["usd"] = self._usd.level
            return levels


BUDGET_UNITS: tuple[str, ...] = ("calls", "usd")  # the ``unit`` label's values

__all__ = [
    "BUDGET_UNITS",
    "OVER_REQUESTS",
    "OVER_USD",
    "Budget",
    "HourlyBudget",
    "Reservation",
    "TokenBucket",
    "UnitState",
]
