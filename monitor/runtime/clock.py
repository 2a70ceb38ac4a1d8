"""Injected time: budgets, retries, commit throttling and schedules are tested without sleeping."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Protocol


class Clock(Protocol):
    def time(self) -> float:
        """Wall-clock seconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Monotonic seconds, for durations and deadlines."""
        ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class ManualClock:
    """A clock that only moves when told to (sleep advances it instantly)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._mono = 0.0
        self.sleeps: list[float] = []

    def time(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        self._now += seconds
        self._mono += seconds

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(max(0.0, seconds))


@dataclass(frozen=True)
class Backoff:
    """Capped exponential backoff between retries; the waiting is done on an injected Clock.

    With ``jitter`` each delay is scaled by a random factor in [0.5, 1): many worker threads
    hit by the same 429 burst then do not retry in lockstep.
    """

    initial_s: float = 0.5
    max_s: float = 30.0
    multiplier: float = 2.0
    jitter: bool = False

    def delay(self, failures: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after the ``failures``-th consecutive failure (1-based)."""
        if failures < 1:
            return 0.0
        base = float(min(self.max_s, self.initial_s * self.multiplier ** (failures - 1)))
        if self.jitter:
            base *= 0.5 + 0.5 * (rng or random).random()
        return base


class RetryState:
    """Consecutive failures of one operation, retried on an injected clock after a backoff.

    The one retry mechanism of the stream steps, the daemon's poll and the database's setup: a
    caller asks ``due()`` before trying (non-blocking steps skip a try until then) or ``wait()``s
    out the delay (a blocking loop), reports ``failed()`` or ``succeeded()``.
    """

    def __init__(self, backoff: Backoff, clock: Clock | None = None) -> None:
        self.backoff = backoff
        self.clock = clock or SystemClock()
        self.failures = 0
        self.retry_at = 0.0

    @property
    def healthy(self) -> bool:
        """No failure since the last success."""
        return self.failures == 0

    def due(self) -> bool:
        """Whether the next try may be made now."""
        return not self.failures or self.clock.monotonic() >= self.retry_at

    def remaining(self) -> float:
        """Seconds until the next try is due (0 when it is)."""
        return max(0.0, self.retry_at - self.clock.monotonic()) if self.failures else 0.0

    def failed(self) -> float:
        """Counts a failure; the delay before the next try, in seconds."""
        self.failures += 1
        delay = self.backoff.delay(self.failures)
        self.retry_at = self.clock.monotonic() + delay
        return delay

    def succeeded(self) -> int:
        """Counts a success; how many failures came before it."""
        failures, self.failures = self.failures, 0
        return failures

    def wait(self) -> None:
        """Sleeps (on the clock) until the next try is due."""
        self.clock.sleep(self.remaining())


class Deadline:
    """A monotonic deadline shared by several operations (join(timeout) hands the rest down)."""

    def __init__(self, timeout: float | None, clock: Clock | None = None) -> None:
        self._clock = clock or SystemClock()
        self._end = None if timeout is None else self._clock.monotonic() + timeout

    def remaining(self) -> float | None:
        if self._end is None:
            return None
        return max(0.0, self._end - self._clock.monotonic())

    def expired(self) -> bool:
        rem = self.remaining()
        return rem is not None and rem <= 0.0
