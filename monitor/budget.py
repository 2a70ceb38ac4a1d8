"""The hourly judge budget as the scheduled jobs that call a judge see it (the daemon's sampler,
``consumers.sampling.Sampler``, implements it)."""

from __future__ import annotations

from typing import Protocol


class Budget(Protocol):
    """The daemon's hourly judge budget (``consumers.sampling.Sampler``): ``reserve`` returns
    None when granted, else why not; ``settle`` replaces a reservation by what was spent."""

    def reserve(self, calls: int) -> str | None: ...

    def settle(self, reserved_calls: int, calls: int, usd: float) -> None: ...


__all__ = ["Budget"]
