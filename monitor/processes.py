"""Child processes casewatch starts itself: the embedded broker, Prometheus, Alertmanager."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import IO


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
    (``stop_process``)."""
    return subprocess.Popen(  # noqa: S603 -- fixed argv, no shell
        argv,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        env=None if env is None else {**os.environ, **env},
        start_new_session=True,
    )


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
