"""Ctrl-C stops ``casewatch pairwise`` at once: the comparisons not started are cancelled
(``monitor.workers.fan_out``), not run one by one against a slow judge before the exit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import yaml

from tests.fake_judge_server import FakeJudgeServer, pairwise
from tests.monitor.commands.test_batch_judge_down import _sigint_as_from_a_terminal
from tests.monitor.commands.test_pairwise_cli import TIE, system_file
from tests.support.waiting import DEADLINE_S, wait_for

ROOT = Path(__file__).resolve().parents[3]
QUESTIONS = 30


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
        proc = subprocess.Popen(
            [sys.executable, "-m", "monitor.cli", *args, "--concurrency", "1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            preexec_fn=_sigint_as_from_a_terminal,
        )
        try:

            def judging() -> bool:
                assert proc.poll() is None, proc.communicate()
                return bool(server.requests)

            wait_for(judging, "the first comparison under way")
            proc.send_signal(signal.SIGINT)
            # The bound only ends a test that would hang; the exit is the condition.
            _, err = proc.communicate(timeout=DEADLINE_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        made = len(server.requests)
    stderr = err.decode()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert f"interrupted ({QUESTIONS} comparisons queued)" in stderr
    assert "nothing written" in stderr
    # One comparison was under way (concurrency 1); the rest never reached the judge.
    assert made < QUESTIONS
