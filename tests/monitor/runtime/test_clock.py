"""The retry state every retrying loop shares: backoff on the injected clock."""

from __future__ import annotations

from monitor.runtime.clock import Backoff, ManualClock, RetryState


def test_a_failure_defers_the_next_try_by_the_backoff_and_a_success_resets_it() -> None:
    clock = ManualClock()
    retry = RetryState(Backoff(initial_s=1.0, max_s=4.0), clock)
    assert retry.healthy and retry.due() and retry.remaining() == 0.0
    assert [retry.failed() for _ in range(4)] == [1.0, 2.0, 4.0, 4.0]
    assert not retry.healthy and not retry.due() and retry.remaining() == 4.0
    clock.advance(3.0)
    assert not retry.due() and retry.remaining() == 1.0
    clock.advance(1.0)
    assert retry.due()
    assert retry.succeeded() == 4
    assert retry.healthy and retry.failed() == 1.0  # counting starts over


def test_wait_sleeps_on_the_clock_until_the_try_is_due() -> None:
    clock = ManualClock()
    retry = RetryState(Backoff(initial_s=0.5, max_s=30.0), clock)
    start = clock.monotonic()
    retry.wait()  # nothing failed: no wait
    assert clock.monotonic() == start
    retry.failed()
    retry.failed()
    retry.wait()
    assert clock.monotonic() == start + 1.0 and retry.due()
