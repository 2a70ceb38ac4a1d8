"""A fixed pool of daemon worker threads that returns ``concurrent.futures.Future`` objects.

Why not ``ThreadPoolExecutor``: since Python 3.9 its workers are joined when the interpreter
exits, so a judge call still running when a stop gives up on it (the drain timed out; its turn
stays uncommitted and is re-read after a restart) keeps the process alive until the call's own
timeout, retries included. Here the workers are daemon threads: whoever stops the daemon waits
at most the drain timeout plus a fixed margin
(``monitor.stream.shutdown_budget.shutdown_budget_s``), whatever the judges do. The judge
step, the panel (its second primary), the job scheduler and the baseline job each run on a
pool of their own; the rubric grader fans each text out with ``fan_out`` (below).
Abandoned calls are counted by the owner (``calls_running``).

Futures behave as the executor's do: ``cancel()`` succeeds while the call has not started, and
a cancelled or shut-down pool never starts it.

``fan_out`` is the CLI's judging fan-out (``casewatch pairwise``, ``tournament``, ``rubric
grade``): a ``with ThreadPoolExecutor`` would, on Ctrl-C, wait in ``__exit__`` for every queued
call (N x the judge timeout); here the calls not started are cancelled and the running ones
abandoned on their daemon threads, so the interrupt reaches the command at once.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

R = TypeVar("R")
T = TypeVar("T")

_Work = tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]


class DaemonThreadPool:
    def __init__(self, workers: int, name: str) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self._queue: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._shutdown = False
        self._lock = threading.Lock()
        self._workers = workers
        self._name = name
        self._threads: list[threading.Thread] = []  # started on the first submit

    def submit(self, fn: Callable[..., R], *args: Any) -> Future[R]:
        future: Future[R] = Future()
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot submit to a pool that was shut down")
            if not self._threads:
                for i in range(self._workers):
                    thread = threading.Thread(
                        target=self._work, name=f"{self._name}_{i}", daemon=True
                    )
                    thread.start()
                    self._threads.append(thread)
            self._queue.put((future, fn, args))
        return future

    @property
    def queued(self) -> int:
        """Calls waiting for a worker (approximate: the queue's size, cancelled ones included)."""
        return self._queue.qsize()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn, args = item
            if not future.set_running_or_notify_cancel():
                continue  # cancelled while queued
            try:
                result = fn(*args)
            except BaseException as exc:  # handed to whoever reads the future, as executors do
                future.set_exception(exc)
            else:
                future.set_result(result)

    def shutdown(self) -> None:
        """Cancel the calls not started; let running ones finish in their (daemon) threads,
        whose results nobody reads. Returns at once."""
        with self._lock:
            if self._shutdown:
                return
            self._shutdown = True
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0].cancel()
        for _ in self._threads:
            self._queue.put(None)


def fan_out(fn: Callable[[T], R], items: Iterable[T], workers: int, name: str) -> Iterator[R]:
    """``fn`` over ``items`` on ``workers`` daemon threads; yields the results in input order.

    However the caller stops reading (KeyboardInterrupt while waiting, an exception from
    ``fn`` raised here, the generator closed), the calls not started are cancelled and the
    ones running are abandoned: nothing waits for the queue to drain.
    """
    pool = DaemonThreadPool(workers, name)
    try:
        futures = [pool.submit(fn, item) for item in items]
        for future in futures:
            yield future.result()
    finally:
        pool.shutdown()
