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
