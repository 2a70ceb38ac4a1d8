"""``casewatch`` writing into a pipe whose reader went away (``tee`` ended by the same Ctrl-C):
the command finishes as it would have, with no BrokenPipeError report. A command printing data
(``casewatch schema | head``) stops writing; one whose output is its run's log writes its
closing lines to stderr instead (``tests/monitor/demo/test_run.py``, the demo stopped by
SIGINT after its ``tee`` is gone)."""

from __future__ import annotations

import os
import subprocess
import sys


def test_a_reader_gone_is_no_error() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody reads: every write fails with EPIPE
    try:
        done = subprocess.run(
            [sys.executable, "-m", "monitor.cli", "schema"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            check=False,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 0, done.stderr.decode()
    assert b"BrokenPipe" not in done.stderr
    assert b"TurnEvent" not in done.stderr  # data is not spilled onto the terminal
