"""``casewatch judge`` when the judge is down: a check before the run, a non-zero
exit when every turn failed, and Ctrl-C that keeps what was written and says how to resume."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from monitor.commands.batch import judge_command
from tests.fake_judge_replies import scores, slow
from tests.fake_judge_server import FakeJudgeServer, malformed
from tests.fixtures.judge_server import FAKE_JUDGE_MODEL
from tests.support.cli_judging import sigint_as_from_a_terminal
from tests.support.turn_lines import stable_and_canary
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[3]


def _config(tmp_path: Path, base_url: str) -> Path:
    path = tmp_path / "casewatch.yaml"
    path.write_text(
        "judges:\n  remote:\n    kind: openai\n"
        f"    base_url: {base_url}\n    model: {FAKE_JUDGE_MODEL}\n"
        "    timeout_seconds: 5\n    transport_retries: 0\n    output_retries: 0\n"
        "judge: remote\n"
    )
    return path


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_judge_that_is_down_stops_the_run_before_it_starts(tmp_path: Path) -> None:
    src, _ = stable_and_canary(tmp_path, conversations=2)
    out = tmp_path / "out.jsonl"
    config = _config(tmp_path, f"http://127.0.0.1:{_closed_port()}/v1")
    result = CliRunner().invoke(
        judge_command, [str(src), "--out", str(out), "--config", str(config), "--no-progress"]
    )
    assert result.exit_code == 1
    assert "judge 'remote'" in result.output and "did not answer" in result.output
    assert "nothing was judged" in result.output
    assert "Traceback" not in result.output
    assert not out.exists()


def test_a_run_where_every_turn_failed_exits_non_zero_with_a_summary(tmp_path: Path) -> None:
    src, _ = stable_and_canary(tmp_path, conversations=2)
    out = tmp_path / "out.jsonl"
    with FakeJudgeServer() as server:
        server.responder = lambda request: malformed()
        config = _config(tmp_path, server.base_url)
        result = CliRunner().invoke(
            judge_command,
            [str(src), "--out", str(out), "--config", str(config), "--no-progress"],
        )
    assert result.exit_code == 1, result.output
    assert "all 4 turn(s) judged in this run ended judge_failed" in result.output


def test_ctrl_c_keeps_what_was_judged_and_the_rerun_resumes_and_counts_every_turn(
    tmp_path: Path,
) -> None:
    src, _ = stable_and_canary(tmp_path, conversations=6)  # 12 turns
    out = tmp_path / "out.jsonl"
    args = [sys.executable, "-m", "monitor.cli", "judge", str(src), "--out", str(out)]
    with FakeJudgeServer() as server:
        # The first calls are answered at once, every later one after 3 s (within the judge's
        # 5 s timeout): the run is still judging when the interrupt comes, however late this
        # test is scheduled on a busy machine (an evenly slow judge could finish first).
        server.script([*(scores() for _ in range(3)), *(slow(3.0) for _ in range(20))])
        config = _config(tmp_path, server.base_url)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(
            [*args, "--config", str(config), "--concurrency", "1", "--no-progress"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            preexec_fn=sigint_as_from_a_terminal,
        )
        try:

            def two_verdicts_written() -> bool:
                assert proc.poll() is None, proc.communicate()
                return out.exists() and out.read_bytes().count(b"\n") >= 2

            wait_for(two_verdicts_written, "two verdicts written")
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        stderr = err.decode()
        assert proc.returncode == 130, stderr
        assert "Traceback" not in stderr
        kept = out.read_bytes().count(b"\n")
        assert 2 <= kept < 12
        assert f"interrupted: {kept} turn(s) kept in {out}" in stderr
        assert "run the same command again to resume" in stderr

        server.reset()  # the rerun's calls are answered at once
        again = CliRunner().invoke(
            judge_command,
            [str(src), "--out", str(out), "--config", str(config), "--no-progress", "--json"],
        )
    assert again.exit_code == 0, again.output
    summary = json.loads(again.stdout)
    assert summary["read"] == 12
    assert summary["skipped_existing"] == kept and summary["judged"] == 12 - kept
    # The table covers every turn of the file, the earlier run's verdicts included.
    assert sum(a["n"] for a in summary["per_assistant"].values()) == 12


def test_a_missing_key_is_a_configuration_problem_exit_2_from_judge_and_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One exit-code policy: a key variable that is not set is something to fix before
    running (exit 2), from the batch command and from the daemon alike."""
    from monitor.cli import main

    monkeypatch.delenv("CASEWATCH_TEST_UNSET_KEY", raising=False)
    src, _ = stable_and_canary(tmp_path, conversations=1)
    config = tmp_path / "casewatch.yaml"
    config.write_text(
        "judges:\n  remote:\n    kind: openai\n    base_url: http://127.0.0.1:9/v1\n"
        f"    model: {FAKE_JUDGE_MODEL}\n    api_key_env: CASEWATCH_TEST_UNSET_KEY\n"
        f"judge: remote\nstorage:\n  url: sqlite:///{tmp_path / 'db.sqlite'}\n"
        "server:\n  port: 0\n"
    )
    out = tmp_path / "out.jsonl"
    judged = CliRunner().invoke(
        main, ["judge", str(src), "--out", str(out), "--config", str(config), "--no-progress"]
    )
    ran = CliRunner().invoke(main, ["run", "--config", str(config), "--file", str(src)])
    for result in (judged, ran):
        assert result.exit_code == 2, result.output
        assert "CASEWATCH_TEST_UNSET_KEY" in result.output, result.output
        assert "Traceback" not in result.output
    assert not out.exists()
