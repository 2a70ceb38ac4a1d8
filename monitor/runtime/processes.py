"""Child processes casewatch starts itself: the embedded broker, Prometheus, Alertmanager, Label
Studio (and, in the tests, the contract brokers, the model server, ``casewatch run`` processes
and consumer group members; headless Chromium, which needs descriptors of its own, takes
``parent_death_hook`` alone).

Each child dies with its parent whatever ends the parent, SIGKILL included: on Linux the child
asks the kernel for SIGTERM when its parent goes (``prctl(PR_SET_PDEATHSIG)``), so no broker or
Prometheus is left running with parent 1 after a killed ``casewatch demo`` or test run.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_POLL_S = 0.02


def parent_death_hook() -> Callable[[], None] | None:
    """What the child runs between fork and exec: SIGTERM when the parent dies. Resolved here,
    in the parent: between fork and exec only the call itself is safe. ``spawn_logged`` runs
    it; a child started otherwise (its own descriptors) calls it from its own hook."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    prctl = libc.prctl
    parent = os.getpid()

    def die_with_parent() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        # The parent may have died between fork and prctl: nobody would signal us then.
        if os.getppid() != parent:
            os._exit(1)

    return die_with_parent


def spawn_logged(
    argv: list[str],
    log: IO[bytes],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start a child with stdout and stderr to ``log`` and no stdin, in a session of its own:
    Ctrl-C in the terminal signals the whole foreground process group, and these children must
    outlive the daemon's drain and final commit; their owner stops them in order
    (``stop_process``). The child gets SIGTERM when its parent dies (Linux). The kernel ties
    that to the thread that started it: start children from a thread that lives as long as
    they should (the main thread, in casewatch and the tests)."""
    return subprocess.Popen(  # noqa: S603 -- fixed argv, no shell
        argv,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        env=None if env is None else {**os.environ, **env},
        start_new_session=True,
        preexec_fn=parent_death_hook(),  # one prctl call, resolved before the fork
    )


def wait_ready(
    proc: subprocess.Popen[bytes],
    ready: Callable[[], bool],
    timeout_s: float,
    *,
    interval_s: float = _POLL_S,
) -> bool:
    """Poll ``ready`` every ``interval_s`` until it holds while ``proc`` runs (True), or
    ``proc`` exits or ``timeout_s`` passes (False: ``proc.poll()`` says which). The caller
    stops a child that never became ready. A costly probe (a client connecting) takes a longer
    interval."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if ready() and proc.poll() is None:
            return True
        time.sleep(interval_s)
    return False


def start_supervised(
    argv: list[str],
    log: IO[bytes],
    ready: Callable[[], bool],
    timeout_s: float,
    stop_timeout_s: float,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    interval_s: float = _POLL_S,
) -> subprocess.Popen[bytes] | None:
    """``spawn_logged`` then ``wait_ready``: the running, ready child, or None once a child
    that exited or never became ready was stopped and reaped (its log says why). Used where a
    child is started and waited for in one place: the embedded broker (``consumers/tansu.py``),
    Label Studio, the contract suite's second broker and the documented model server
    (``tests/test_docs_real_model.py``). Prometheus, Alertmanager and the tests' model server
    (``tests/model_server.py``) start and wait at different points: they call
    ``spawn_logged`` and ``wait_ready`` themselves."""
    proc = spawn_logged(argv, log, cwd=cwd, env=env)
    try:
        if wait_ready(proc, ready, timeout_s, interval_s=interval_s):
            return proc
    except BaseException:
        stop_process(proc, stop_timeout_s)
        raise
    stop_process(proc, stop_timeout_s)
    return None


def stop_process(proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    """SIGTERM a child, SIGKILL it if it has not exited within ``timeout_s``, and reap it (the
    embedded broker, Prometheus and Alertmanager)."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout_s)
