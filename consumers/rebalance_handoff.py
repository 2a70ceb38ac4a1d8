"""Running rebalance callbacks on the caller's thread instead of kafka-python's I/O thread.

kafka-python 3 runs the rebalance listener on its background I/O thread, while the thread that
called ``poll()`` or ``close()`` waits. A revocation makes the daemon finish and store the
revoked partitions' turns and commit them (arroyo's join-on-revoke), which would then run the
pipeline on a thread not its own, safe only because the loop thread happens to be blocked.

``LoopHandoff.call`` runs the consumer call on a worker thread instead, and the calling (loop)
thread meanwhile serves the callbacks that call triggers: the listener posts each one
(``post``) and awaits its result without blocking the I/O loop, so heartbeats go on. Callbacks
posted while no call is waiting return False from ``post``; the listener then runs them itself.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_DONE, _FAILED, _REQUEST = "done", "failed", "request"


class LoopHandoff:
    def __init__(self, name: str = "kafka-call") -> None:
        self._name = name
        self._calls: queue.SimpleQueue[tuple[Callable[[], Any], queue.SimpleQueue[Any]] | None]
        self._calls = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self._replies: queue.SimpleQueue[tuple[str, Any]] | None = None
        self._post_lock = threading.Lock()
        self._call_lock = threading.Lock()  # one call at a time

    def call(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the worker thread; callbacks posted meanwhile run on this thread."""
        with self._call_lock:
            replies: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
            with self._post_lock:
                self._replies = replies
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._work, name=self._name, daemon=True)
                self._worker.start()
            self._calls.put((fn, replies))
            try:
                while True:
                    kind, payload = replies.get()
                    if kind == _DONE:
                        return payload  # type: ignore[no-any-return]
                    if kind == _FAILED:
                        raise payload
                    payload()
            finally:
                with self._post_lock:
                    self._replies = None
                # Requests posted just before: served here, never left waiting.
                while not replies.empty():
                    kind, payload = replies.get_nowait()
                    if kind == _REQUEST:
                        payload()

    def post(self, request: Callable[[], None]) -> bool:
        """Run ``request`` on the thread waiting in ``call``; False when none is waiting."""
        with self._post_lock:
            if self._replies is None:
                return False
            self._replies.put((_REQUEST, request))
            return True

    def close(self) -> None:
        """End the worker thread (after the call under way, if any)."""
        self._calls.put(None)

    def _work(self) -> None:
        while True:
            item = self._calls.get()
            if item is None:
                return
            fn, replies = item
            try:
                result = fn()
            except BaseException as exc:  # handed to the caller, raised there
                replies.put((_FAILED, exc))
            else:
                replies.put((_DONE, result))
