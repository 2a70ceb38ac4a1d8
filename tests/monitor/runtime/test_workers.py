"""DaemonThreadPool: executor-like futures on daemon threads (abandoned calls never hold the
interpreter's exit; the subprocess test of that is in tests/monitor/stream/test_runner.py)."""

from __future__ import annotations

import threading

import pytest

from monitor.runtime.workers import DaemonThreadPool


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
