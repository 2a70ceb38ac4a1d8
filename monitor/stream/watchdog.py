"""The stop bound, enforced: a stop request that has not finished within its budget ends the
process.

Every step of stopping has its own limit (``monitor/stream/runner.py``), but those limits only
hold for code that returns to the loop: a client library looping inside a call (kafka-python
3.0.12's fetcher spun forever on a batch it could not decompress) never would, and
the orchestrator's SIGKILL would come first, without a word about why. The watchdog thread is
started before the signal handlers are installed; a stop request only sets an event (safe in a
signal handler); if the stop is not done within ``bound_s`` it prints where every thread is
(``faulthandler``) and one line saying what happened, then exits 1. Nothing is lost: records
not finished were never committed and are read again after the restart.
"""

from __future__ import annotations

import faulthandler
import os
import threading

EXIT_CODE = 1
_STDERR = 2  # the descriptor: the stuck thread may hold sys.stderr's lock


class StopWatchdog:
    def __init__(self, bound_s: float) -> None:
        if bound_s <= 0:
            raise ValueError(f"bound_s must be > 0, got {bound_s}")
        self._bound = bound_s
        self._armed = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="stop-watchdog", daemon=True)

    def start(self) -> StopWatchdog:
        self._thread.start()
        return self

    def arm(self) -> None:
        """A stop was requested: the bound counts from now. Safe from a signal handler."""
        self._armed.set()

    def done(self) -> None:
        """The stop finished (or the process ends normally): stand down."""
        self._done.set()
        self._armed.set()

    def _watch(self) -> None:
        self._armed.wait()
        if self._done.wait(self._bound):
            return
        # No logging here: the stuck thread may hold the log stream's lock.
        faulthandler.dump_traceback(file=_STDERR, all_threads=True)
        line = (
            f"casewatch: stopping did not finish within {self._bound:g} s "
            "(drain_timeout_seconds + 30 s; the stack of every thread is above); exiting now: "
            "turns not finished were not committed and are re-read on restart\n"
        )
        os.write(_STDERR, line.encode())
        os._exit(EXIT_CODE)
