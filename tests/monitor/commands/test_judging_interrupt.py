"""Ctrl-C stops the judging commands at once: the judge calls not started are cancelled
(``monitor.runtime.workers``), not run one by one against a slow judge before the exit.
``casewatch judge`` is covered in test_batch_judge_down.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import yaml

from tests.fake_judge_server import FakeJudgeServer, keyword_grader, pairwise
from tests.support.cli_judging import (
    KEYWORDS,
    RUBRICS,
    TIE,
    rubric_config,
    sigint_as_from_a_terminal,
    system_file,
)
from tests.support.waiting import DEADLINE_S, wait_for

ROOT = Path(__file__).resolve().parents[3]
QUESTIONS = 30


def _interrupt_once_judging(
    args: list[str], server: FakeJudgeServer
) -> tuple[subprocess.Popen[bytes], str]:
    """Run ``casewatch ARGS``, send SIGINT once the judge got a request, wait for the exit."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "monitor.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        preexec_fn=sigint_as_from_a_terminal,
    )
    try:

        def judging() -> bool:
            assert proc.poll() is None, proc.communicate()
            return bool(server.requests)

        wait_for(judging, "the first judge call under way")
        proc.send_signal(signal.SIGINT)
        # The bound only ends a test that would hang; the exit is the condition.
        _, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc, err.decode()


def test_ctrl_c_cancels_the_queued_comparisons_and_exits_130(tmp_path: Path) -> None:
    a, b = system_file(tmp_path, "good", 3, QUESTIONS), system_file(tmp_path, "bad", 1, QUESTIONS)
    # Every reply takes 3 s (within the judge's timeout): answering every queued comparison
    # before exiting, as a pool's __exit__ would, takes minutes, past the wait below.
    with FakeJudgeServer(latency=3.0) as server:
        server.responder = pairwise(lambda pair: TIE)
        config = tmp_path / "casewatch.yaml"
        judge = {
            "base_url": server.base_url,
            "model": "fake-judge",
            "timeout_seconds": 10,
            "transport_retries": 0,
        }
        config.write_text(yaml.safe_dump({"judges": {"pw": judge}}))
        args = ["pairwise", str(a), str(b), "--judge", "pw", "--config", str(config)]
        proc, stderr = _interrupt_once_judging([*args, "--concurrency", "1"], server)
        made = len(server.requests)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert f"interrupted ({QUESTIONS} comparisons queued)" in stderr
    assert "nothing written" in stderr
    # One comparison was under way (concurrency 1); the rest never reached the judge.
    assert made < QUESTIONS


def test_ctrl_c_cancels_the_queued_gradings_and_exits_130(tmp_path: Path) -> None:
    rubrics = tmp_path / "r.yaml"
    rubrics.write_text(RUBRICS)
    passages = [{"id": f"kb{i}", "text": f"Article {i}: run unlock --force."} for i in range(20)]
    responses = tmp_path / "good.jsonl"
    responses.write_text(json.dumps({"system": "good", "query": "lock", "passages": passages}))
    queued = 2 * len(passages)  # two questions per passage
    with FakeJudgeServer(latency=3.0) as server:
        server.responder = keyword_grader(KEYWORDS)
        config = rubric_config(tmp_path, server)
        args = ["rubric", "grade", str(rubrics), str(responses), "--out-dir", str(tmp_path / "o")]
        proc, stderr = _interrupt_once_judging(
            [*args, "--config", str(config), "--concurrency", "1"], server
        )
        made = len(server.requests)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "interrupted: gradings not started were cancelled; no file written" in stderr
    assert not (tmp_path / "o").exists()
    assert made < queued
