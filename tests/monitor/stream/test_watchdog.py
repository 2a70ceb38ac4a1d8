"""The stop watchdog ends a process whose stop does not finish (monitor/stream/watchdog.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from monitor.stream.watchdog import EXIT_CODE, StopWatchdog

# A main thread spinning in Python, as kafka-python's fetcher did on an unreadable batch.
SPINNING = textwrap.dedent(
    """
    from monitor.stream.watchdog import StopWatchdog
    watchdog = StopWatchdog(0.5).start()
    watchdog.arm()
    while True:
        pass
    """
)
FINISHING = textwrap.dedent(
    """
    from monitor.stream.watchdog import StopWatchdog
    watchdog = StopWatchdog(0.5).start()
    watchdog.arm()
    watchdog.done()
    print("stopped in time")
    """
)


def test_a_stop_that_never_finishes_ends_the_process_with_the_stacks_and_one_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SPINNING], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == EXIT_CODE
    assert "stopping did not finish within 0.5 s" in proc.stderr
    assert "re-read on restart" in proc.stderr
    assert 'File "<string>"' in proc.stderr  # where the stuck thread was


def test_a_stop_that_finishes_stands_the_watchdog_down() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", FINISHING], capture_output=True, text=True, timeout=60
    )
    assert (proc.returncode, proc.stdout.strip()) == (0, "stopped in time")


def test_a_bad_bound_is_rejected() -> None:
    with pytest.raises(ValueError, match="bound_s"):
        StopWatchdog(0)
