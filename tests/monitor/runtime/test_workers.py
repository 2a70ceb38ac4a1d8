"""DaemonThreadPool: executor-like futures on daemon threads (abandoned calls never hold the
interpreter's exit; the subprocess test of that is in tests/monitor/stream/test_runner.py), and
fan_out, the CLI's judging fan-out, under Ctrl-C."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator

import pytest

from monitor.runtime.workers import DaemonThreadPool, fan_out


def test_results_and_exceptions_reach_the_futures() -> None:
    pool = DaemonThreadPool(2, "t")
    try:
        ok = pool.submit(lambda a, b: a + b, 2, 3)
        bad = pool.submit(lambda: 1 // 0)
        assert ok.result(timeout=30) == 5
        with pytest.raises(ZeroDivisionError):
            bad.result(timeout=30)
    finally:
        pool.shutdown()


def test_workers_are_daemon_threads_started_on_first_submit() -> None:
    before = {t.name for t in threading.enumerate()}
    pool = DaemonThreadPool(3, "lazy-pool")
    try:
        assert not [t for t in threading.enumerate() if t.name.startswith("lazy-pool")]
        pool.submit(int).result(timeout=30)
        workers = [t for t in threading.enumerate() if t.name.startswith("lazy-pool")]
        assert len(workers) == 3 and all(t.daemon for t in workers)
        assert not before & {t.name for t in workers}
    finally:
        pool.shutdown()


def test_queued_calls_can_be_cancelled_and_shutdown_cancels_the_rest() -> None:
    started, gate = threading.Event(), threading.Event()

    def hold() -> bool:
        started.set()
        return gate.wait(30)

    pool = DaemonThreadPool(1, "t")
    running = pool.submit(hold)
    assert started.wait(30)
    queued = [pool.submit(int) for _ in range(3)]
    assert queued[0].cancel()  # not started: the one worker is busy
    assert not running.cancel()  # started: too late
    pool.shutdown()
    assert all(f.cancelled() for f in queued)
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(int)
    gate.set()
    assert running.result(timeout=30) is True  # a running call finishes in its thread


def test_a_pool_needs_a_worker() -> None:
    with pytest.raises(ValueError, match="workers"):
        DaemonThreadPool(0, "t")


def test_an_interrupt_while_waiting_cancels_the_queued_calls_and_propagates() -> None:
    """Ctrl-C in a CLI fan-out (``casewatch pairwise``, ``rubric grade``): the calls not started
    never start, the one under way is abandoned on its daemon thread (it finishes there and
    nobody reads it), and the interrupt reaches the caller at once, not after the queue."""
    assert threading.current_thread() is threading.main_thread()  # signals reach this thread
    submitted, gate, finished = threading.Event(), threading.Event(), threading.Event()
    calls: list[int] = []

    def items() -> Iterator[int]:
        yield from range(5)
        submitted.set()  # fan_out asked for one more: every call is queued

    def call(item: int) -> int:
        calls.append(item)
        if item == 0:
            submitted.wait(30)  # hang guards only: the events are the conditions
            # Ctrl-C from a terminal, while the caller waits for this call's result.
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
            gate.wait(30)
            finished.set()
        return item

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            list(fan_out(call, items(), 1, "fan-out-interrupted"))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert not finished.is_set()  # the interrupt did not wait for the call under way
    (worker,) = [t for t in threading.enumerate() if t.name == "fan-out-interrupted_0"]
    gate.set()
    worker.join(30)
    assert not worker.is_alive()  # the call under way finished in its thread, which then ended
    assert finished.is_set()
    assert calls == [0]  # the four queued calls were cancelled: none ever started
