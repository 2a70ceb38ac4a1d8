"""`casewatch demo` against a real embedded broker (in-process,
as a process stopped by SIGTERM, and as a process whose broker dies as it is interrupted)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import yaml
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from consumers.tansu import FETCH_MAX_WAIT_MS
from monitor.cli import main
from monitor.config.settings import load_settings
from monitor.demo.options import DemoOptions, demo_settings, stop_budget_s
from monitor.demo.run import Demo
from monitor.storage.audit import counts
from monitor.storage.store import Store
from tests.support.http import scrape
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "turns.jsonl"
DEADLINE_S = 240.0  # generous: a loaded machine; passing tests end as soon as the condition holds


def judged_in(metrics_text: str) -> float:
    pattern = (
        r'^casewatch_turns_judged_total\{[^}]*band="(none|minor|moderate|severe)"[^}]*\} (\S+)'
    )
    return sum(float(m.group(2)) for m in re.finditer(pattern, metrics_text, re.MULTILINE))


def wait_until_judged(url: str) -> str:
    """/metrics once a turn is judged and a record dead-lettered."""
    seen = [""]

    def judged() -> bool:
        seen[0] = scrape(url)
        return judged_in(seen[0]) > 0 and "casewatch_dead_letter_total{" in seen[0]

    wait_for(
        judged,
        "a judged turn in /metrics",
        timeout=DEADLINE_S,
        interval=0.2,
        explain=lambda: seen[0],
    )
    return seen[0]


# ---------------------------------------------------------------- pure parts


def test_demo_settings_keep_the_judges_and_replace_kafka_storage_and_server() -> None:
    base = load_settings(None, kafka={"topics": ["elsewhere"]}, sampling={"default_rate": 0.5})
    s = demo_settings(base, "127.0.0.1:1234", "sqlite:///x.db", "127.0.0.1", 0)
    assert s.kafka.bootstrap_servers == ["127.0.0.1:1234"]
    assert s.kafka.topics == ["support.turns"]
    assert (
        s.kafka.fetch_max_wait_ms == FETCH_MAX_WAIT_MS
    )  # the embedded broker's (consumers/tansu.py)
    assert (s.storage.url, s.server.port) == ("sqlite:///x.db", 0)
    assert s.sampling.default_rate == 0.5 and s.judge == base.judge


def test_the_demo_judges_every_turn_unless_the_configuration_says_how_to_sample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Production defaults sample a tenth under an hourly budget; the demo does not.
    monkeypatch.delenv("CASEWATCH_SAMPLING")  # the suite judges everything (tests/conftest.py)
    defaults = load_settings(None)
    assert defaults.sampling.default_rate < 1.0
    assert defaults.sampling.budget_calls_per_hour is not None
    s = demo_settings(defaults, "127.0.0.1:1234", "sqlite:///x.db", "127.0.0.1", 0)
    assert s.sampling.default_rate == 1.0
    assert s.sampling.budget_calls_per_hour is None and s.sampling.budget_usd_per_hour is None


def test_cli_reports_missing_examples_and_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["demo", "--examples", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2
    assert "examples file" in result.output and "does not exist" in result.output


# ---------------------------------------------------------------- with a real broker


@pytest.mark.integration
def test_demo_judges_turns_and_stops_cleanly(tansu: None, tmp_path: Path) -> None:
    lines: list[str] = []
    db = tmp_path / "demo.db"
    options = DemoOptions(rate=100, port=0, db_path=db, summary_interval_s=0.5, alerts=False)
    demo = Demo(load_settings(), options, registry=CollectorRegistry(), echo=lines.append)
    demo.start()
    try:
        assert demo.broker_running
        text = wait_until_judged(demo.metrics_url)
        assert 'casewatch_dead_letter_total{reason="not_json"}' in text
        runner = threading.Thread(target=demo.run)
        runner.start()
        wait_for(
            lambda: any(line.startswith("[") for line in lines),
            "a periodic summary",
            timeout=DEADLINE_S,
            explain=lambda: lines,
        )
        demo.request_stop()
        runner.join(DEADLINE_S)
        assert not runner.is_alive()
    finally:
        demo.stop()
        demo.cleanup()
    assert not demo.broker_running
    assert "stopping" in lines[-3] and lines[-2].startswith("[")
    assert "Ctrl-C again" in lines[-3]  # a stop was requested: a second one quits at once
    assert f"casewatch inspect turns --db {db}" in lines[-1]  # from the alert to its turns
    snap = demo.snapshot()
    store = Store(f"sqlite:///{db}")
    try:
        # Everything judged before the stop was stored: draining lost nothing.
        assert counts(store)["verdicts"] == snap.judged + snap.judge_failed > 0
    finally:
        store.close()


@pytest.mark.integration
def test_demo_process_drains_and_exits_0_on_sigterm(tansu: None, tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "monitor.cli", "demo", "--port", "0"]
    cmd += ["--rate", "100"]
    # No --db: the default database is a new file of the temp directory, kept and printed.
    env = os.environ | {"TMPDIR": str(tmp_path)}
    # The with block closes the pipe and reaps the process on every path.
    with subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, text=True, env=env) as proc:
        try:
            assert proc.stdout is not None
            url = _metrics_url(proc.stdout)
            wait_until_judged(url)
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=DEADLINE_S)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, out
    assert out.rstrip().endswith("casewatch demo: stopped")
    (db,) = re.findall(r"casewatch inspect turns --db (\S+)", out)
    assert Path(db).parent == tmp_path and Path(db).is_file()  # kept after the demo
    listed = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "inspect", "turns", "--db", db, "--json"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert json.loads(listed.stdout)
    # The printed lines run as printed, in a shell, from where the demo ran: the venv is not
    # activated, so they name its casewatch; the `inspect turn` line opens a real turn, the
    # `inspect case` line a real conversation (its turns, its case verdicts once it closed).
    printed = [ln.strip() for ln in out.splitlines() if re.match(r"\s+\S*casewatch inspect", ln)]
    assert any(" inspect turns " in line for line in printed), out
    (turn,) = [t for line in printed for t in re.findall(r"inspect turn (\S+) --db", line)]
    assert turn != "EVENT_ID"  # a real one: its printed line below exits 0 only if it exists
    (conversation,) = [c for line in printed for c in re.findall(r"inspect case (\S+) --db", line)]
    assert conversation != "CONVERSATION_ID"
    path = os.pathsep.join(
        p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "casewatch").exists()
    )
    for line in printed:
        ran = subprocess.run(
            ["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True, timeout=120,
            env=os.environ | {"PATH": path},
        )  # fmt: skip
        assert ran.returncode == 0, (line, ran.stderr)
        assert ran.stdout.strip(), line


@pytest.mark.integration
def test_the_closing_lines_reach_stderr_once_the_tee_is_gone(tansu: None, tmp_path: Path) -> None:
    """``make run | tee demo.log`` and Ctrl-C: the terminal's SIGINT ends ``tee`` too, so the
    demo's closing lines meet a pipe nobody reads. They reach the terminal on stderr instead."""
    cmd = [sys.executable, "-m", "monitor.cli", "demo", "--port", "0", "--rate", "100"]
    cmd += ["--db", str(tmp_path / "demo.db"), "--no-alerts"]
    err = tmp_path / "stderr.log"  # a file: a pipe nobody drained would stall the demo
    with (
        err.open("w") as err_file,
        subprocess.Popen(
            cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=err_file, text=True
        ) as proc,
    ):
        try:
            assert proc.stdout is not None
            wait_until_judged(_metrics_url(proc.stdout))  # running, its signals handled
            proc.stdout.close()  # tee is gone: every write into the pipe fails with EPIPE
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=DEADLINE_S)
        finally:
            if proc.poll() is None:
                proc.kill()
    text = err.read_text()
    assert proc.returncode == 0, text
    assert "stopping: draining in-flight turns" in text
    assert text.rstrip().endswith("casewatch demo: stopped"), text[-2000:]
    assert "BrokenPipe" not in text


@pytest.mark.integration
def test_demo_exits_1_in_bounded_time_when_its_broker_dies_with_the_interrupt(
    tansu: None, tmp_path: Path
) -> None:
    """What a Ctrl-C reaching the broker too did: the daemon cannot commit, the producer cannot
    flush. The demo must still end, within its stop budget, saying what was not committed."""
    config = tmp_path / "demo.yaml"
    # No periodic commits: judged turns are then always uncommitted when the broker dies, so the
    # final commit has something to fail on (with commits every second, a kill right after one
    # with nothing finished since leaves nothing to commit, and exit 0 would be right).
    daemon = {"drain_timeout_seconds": 3, "commit_interval_seconds": 3600}
    config.write_text(yaml.safe_dump({"daemon": daemon}))
    cmd = [sys.executable, "-m", "monitor.cli", "demo", "--port", "0", "--rate", "100"]
    cmd += ["--db", str(tmp_path / "demo.db"), "--config", str(config), "--no-alerts"]
    with subprocess.Popen(
        cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stdout is not None
            wait_until_judged(_metrics_url(proc.stdout))
            brokers = [p for p in psutil.Process(proc.pid).children() if p.name() == "tansu"]
            assert len(brokers) == 1
            brokers[0].kill()
            proc.send_signal(signal.SIGINT)
            budget = stop_budget_s(load_settings(config))
            out, err = proc.communicate(timeout=budget + 10.0)  # + interpreter exit: liveness
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 1, (out, err)
    last = err.rstrip().splitlines()[-1]
    assert last.startswith("casewatch demo: offsets were not committed ("), err
    assert "Traceback" not in err


@pytest.mark.integration
def test_a_second_interrupt_ends_the_demo_and_its_broker_at_once(
    tansu: None, tmp_path: Path
) -> None:
    # A drain that cannot finish by itself: judge calls slower than the test (a fake server
    # that never answers, so the drain waits for its whole, long timeout).
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        judge = {"kind": "openai", "base_url": f"http://127.0.0.1:{silent.getsockname()[1]}/v1"}
        config = tmp_path / "demo.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "judges": {"slow": {**judge, "model": "m", "timeout_seconds": 300}},
                    "judge": "slow",
                    "daemon": {"drain_timeout_seconds": 300},
                }
            )
        )
        cmd = [sys.executable, "-m", "monitor.cli", "demo", "--port", "0", "--rate", "100"]
        cmd += ["--db", str(tmp_path / "demo.db"), "--config", str(config)]
        children: list[psutil.Process] = []
        # The with block closes the pipe and reaps the process on every path.
        with subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, text=True) as proc:
            try:
                assert proc.stdout is not None
                url = _metrics_url(proc.stdout)
                children = psutil.Process(proc.pid).children()
                brokers = [p for p in children if p.name() == "tansu"]
                assert len(brokers) == 1
                wait_for(
                    lambda: re.search(r"^casewatch_in_flight [1-9]", scrape(url), re.MULTILINE),
                    "a judge call in flight",
                    timeout=DEADLINE_S,
                    interval=0.2,
                )
                proc.send_signal(signal.SIGINT)
                for line in proc.stdout:
                    if line.startswith("stopping:"):
                        break
                proc.send_signal(signal.SIGINT)
                # Liveness, not speed: far below the drain's 300 s, however loaded the machine.
                assert proc.wait(60.0) == -signal.SIGINT
                # The broker, and Prometheus + Alertmanager when installed: none outlives the demo.
                for child in children:
                    _wait_gone(child)
            finally:
                if proc.poll() is None:
                    proc.kill()
                for child in children:  # never leak one, even when the test fails
                    if child.is_running():
                        child.kill()


def _wait_gone(process: psutil.Process, timeout_s: float = 60.0) -> None:
    """Wait until ``process`` is dead (a zombie counts: its parent is gone, nobody reaps it)."""
    wait_for(
        lambda: not process.is_running() or process.status() == psutil.STATUS_ZOMBIE,
        f"{process} to end with the demo",
        timeout=timeout_s,
    )


def _metrics_url(stdout: Iterator[str]) -> str:
    for line in stdout:
        match = re.search(r"metrics:\s+(http://\S+/metrics)", line)
        if match:
            return match.group(1)
    raise AssertionError("the demo never printed where /metrics is")


@pytest.mark.integration
def test_duration_stops_the_demo_by_itself(tansu: None, tmp_path: Path) -> None:
    args = ["demo", "--port", "0", "--duration", "1", "--db", str(tmp_path / "d.db"), "--no-alerts"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[-1] == "casewatch demo: stopped"
    # Nobody pressed Ctrl-C: no second one is offered.
    [stopping] = [line for line in lines if line.startswith("stopping:")]
    assert "Ctrl-C" not in stopping
    # The summary, then how to inspect the turns behind an alert and a case (5 lines).
    assert lines[-7].startswith("[") and "consumed" in lines[-7]
    assert lines[-6].startswith(f"the verdicts are kept in {tmp_path / 'd.db'}")
    assert "inspect case " in lines[-2]
