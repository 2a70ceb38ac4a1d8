"""Child processes casewatch starts itself: the embedded broker, Prometheus, Alertmanager."""

from __future__ import annotations

import subprocess


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
