"""Waiting on a condition: the one way a test waits for something another thread or process
does (never a sleep for a duration).

The bound only ends a test that would otherwise hang; it is never a timing threshold, so it is
generous: the suite runs with other processes busy on a 2-core machine. A passing test ends as
soon as its condition holds.
"""

from __future__ import annotations

import time
from collections.abc import Callable

DEADLINE_S = 120.0


def wait_for(
    cond: Callable[[], object],
    what: str = "condition",
    *,
    timeout: float = DEADLINE_S,
    interval: float = 0.05,
    tick: Callable[[], object] | None = None,
    explain: Callable[[], object] | None = None,
) -> None:
    """Check ``cond`` until it is true; fail with ``what`` after ``timeout`` seconds.

    ``tick`` runs before each further check, for what only moves when driven (a pipeline
    step's ``poll``); ``explain`` adds to the failure message the state that was reached.
    """
    if not isinstance(what, str):  # wait_for(cond, 60): the bound is keyword-only
        raise TypeError(f"what must describe the condition, not {what!r}: pass timeout=")
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            detail = f"; got {explain()}" if explain is not None else ""
            raise AssertionError(f"timed out after {timeout}s waiting for {what}{detail}")
        if tick is not None:
            tick()
        time.sleep(interval)
