"""``casewatch`` writing into a pipe whose reader went away (``tee`` ended by the same Ctrl-C):
the command finishes as it would have, with no BrokenPipeError report."""

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
