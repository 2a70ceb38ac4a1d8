"""Closing a rubric grader never waits for the questions being asked: a stop while a rubric run
is grading (its endpoint hung) ends the process, within the daemon's stop bound, instead of
waiting out the endpoint's timeout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

_SCRIPT = """
import socket, sys, threading
from monitor.judging.rubric_grader import RubricGrader
from monitor.judging.rubric_set import RubricEntry
from monitor.config.judges import JudgeConfig

# An endpoint that takes the connection and never answers (a hung judge server).
hung = socket.socket()
hung.bind(("127.0.0.1", 0))
hung.listen(16)
config = JudgeConfig(
    kind="openai",
    model="m",
    base_url=f"http://127.0.0.1:{hung.getsockname()[1]}/v1",
    api_key="k",
    timeout_seconds=3600,  # far beyond the hang guard of the test
    transport_retries=0,
)
grader = RubricGrader("grader", config, concurrency=2)
entry = RubricEntry(id="e1", query="q?", questions=["Does it say x?", "Does it say y?"])
threading.Thread(target=grader.grade_answer, args=(entry, "an answer"), daemon=True).start()
asked, _ = hung.accept()  # a question is being asked now
grader.close()
print("closed", flush=True)
"""


def test_close_returns_and_the_process_exits_with_questions_being_asked(tmp_path: Path) -> None:
    script = tmp_path / "grading.py"
    script.write_text(_SCRIPT)
    try:
        done = subprocess.run(
            [sys.executable, str(script)],
            capture_output=True,
            text=True,
            timeout=120,  # a hang guard: a close that waits never returns (timeout 3600 s)
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the process did not exit: closing the grader waited for its questions")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "closed"
