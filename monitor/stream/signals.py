"""SIGTERM/SIGINT for a process that runs the daemon (or the demo, or the embedded broker) in the
foreground: handlers installed for as long as a ``with`` block runs, and the ones they replaced
put back when it ends. A command may run inside a longer-lived process (a test invoking it
through click's ``CliRunner``), which must not be left with handlers pointing at a finished run.

Handlers are per process and can only be set from the main thread, so these are for the
entrypoints' main thread only.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import FrameType

SignalHandler = Callable[[int, FrameType | None], object] | int | None
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _install_drain_signals(
    stop: Callable[[], None], before_exit: Callable[[], None] | None
) -> dict[signal.Signals, SignalHandler]:
    def second(signum: int, _frame: FrameType | None) -> None:
        signal.signal(signum, signal.SIG_DFL)
        try:
            if before_exit is not None:
                before_exit()
        finally:
            os.kill(os.getpid(), signum)  # die of the signal, as its default action would

    def first(_signum: int, _frame: FrameType | None) -> None:
        then = signal.SIG_DFL if before_exit is None else second
        for sig in STOP_SIGNALS:
            signal.signal(sig, then)
        stop()

    return {sig: signal.signal(sig, first) for sig in STOP_SIGNALS}


def _restore(previous: Mapping[signal.Signals, SignalHandler]) -> None:
    for sig, handler in previous.items():
        # None: the handler was not set from Python, so it cannot be put back as it was; the
        # default action is the closest there is.
        signal.signal(sig, signal.SIG_DFL if handler is None else handler)


@contextmanager
def drain_signals(
    stop: Callable[[], None], before_exit: Callable[[], None] | None = None
) -> Iterator[None]:
    """Inside the block, the first SIGTERM/SIGINT calls ``stop()`` (drain, commit, exit). A
    second one: ``before_exit()`` if given, then the default action, which ends the process at
    once (nothing is lost: unfinished records were never committed). On leaving the block the
    handlers it replaced are back, whichever signals came.

    The handlers only swap handlers and call the callbacks: they may interrupt the main thread
    anywhere, even inside a log call holding the log stream's lock, so logging from them could
    deadlock the process. Without ``before_exit`` the second signal meets no Python code at all.
    """
    previous = _install_drain_signals(stop, before_exit)
    try:
        yield
    finally:
        _restore(previous)


@contextmanager
def stop_signals_call(handler: Callable[[], None]) -> Iterator[None]:
    """Inside the block, every SIGTERM/SIGINT calls ``handler()`` (which must not log, for the
    reason ``drain_signals`` gives); on leaving it the handlers it replaced are back."""

    def call(_signum: int, _frame: FrameType | None) -> None:
        handler()

    previous = {sig: signal.signal(sig, call) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        _restore(previous)
