"""``monitor.runtime.processes``: a child started through the helper dies with its parent whatever
kills the parent (SIGKILL included), and is handed over only once its readiness holds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from monitor.runtime.processes import start_supervised, stop_process
from tests.support.waiting import wait_for

_SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def _gone(pid: int) -> bool:
    """Exited: no such process, or a zombie waiting for whoever adopted it to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_dies_when_its_parent_is_killed(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    parent_code = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from monitor.runtime.processes import start_supervised

        argv = [sys.executable, "-c", "import pathlib, time; "
                "pathlib.Path({str(ready)!r}).touch(); time.sleep(600)"]
        with open({str(tmp_path / "child.log")!r}, "ab") as log:
            child = start_supervised(argv, log, Path({str(ready)!r}).exists, 120.0, 5.0)
        assert child is not None
        print(child.pid, flush=True)
        sys.stdin.read()  # until the test kills this process
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", parent_code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[3],
    )
    try:
        assert parent.stdout is not None
        child_pid = int(parent.stdout.readline())
        assert not _gone(child_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        wait_for(lambda: _gone(child_pid), "the child of the killed parent to exit")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pipe in (parent.stdin, parent.stdout):
            if pipe is not None:
                pipe.close()
        if "child_pid" in locals() and not _gone(child_pid):
            os.kill(child_pid, signal.SIGKILL)


def test_a_child_is_handed_over_once_ready_and_one_that_exits_is_not(tmp_path: Path) -> None:
    flag = tmp_path / "ready"
    argv = [
        sys.executable,
        "-c",
        f"import pathlib, time; pathlib.Path({str(flag)!r}).touch(); time.sleep(600)",
    ]
    with (tmp_path / "child.log").open("ab") as log:
        child = start_supervised(argv, log, flag.exists, 120.0, 5.0)
        assert child is not None
        try:
            assert flag.exists() and child.poll() is None
        finally:
            stop_process(child, 5.0)
        assert child.poll() is not None
        failed = start_supervised(
            [sys.executable, "-c", "raise SystemExit(3)"], log, lambda: False, 120.0, 5.0
        )
    assert failed is None
