"""Trying casewatch on your own stream: `casewatch broker`, `run --file -` (stdin)
and `make run` installing only what running needs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from consumers._kafka import KafkaConsumer
from monitor.storage.audit import counts
from monitor.storage.store import Store
from tests.fixtures.databases import make_turn

ROOT = Path(__file__).resolve().parents[3]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.mark.usefixtures("tansu")
def test_broker_prints_its_address_creates_the_topics_and_stops_on_ctrl_c() -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "monitor.cli", "broker", "--port", "0", "--topic", "mine"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    ) as proc:
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline().strip()
            assert first.startswith("broker listening on 127.0.0.1:"), first
            address = first.rsplit(" ", 1)[1]
            hints = [proc.stdout.readline() for _ in range(4)]
            assert any(f"--bootstrap {address}" in h for h in hints)
            consumer = KafkaConsumer(bootstrap_servers=[address])
            try:
                assert {"mine", "mine.dlq"} <= consumer.topics()
            finally:
                consumer.close()
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def test_run_reads_turns_from_standard_input(tmp_path: Path) -> None:
    db = tmp_path / "v.db"
    turns = [make_turn(f"stdin-{i}").model_dump_json() for i in range(5)]
    env = {
        **_env(),
        "CASEWATCH_STORAGE__URL": f"sqlite:///{db}",
        "CASEWATCH_SERVER__PORT": "0",
    }
    subprocess.run(
        [sys.executable, "-m", "monitor.cli", "db", "upgrade"], env=env, check=True, cwd=tmp_path
    )
    done = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "run", "--file", "-"],
        input="\n".join([*turns, "{not json"]) + "\n",
        text=True,
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    store = Store(f"sqlite:///{db}")
    try:
        assert counts(store)["verdicts"] == 5
    finally:
        store.close()
    [dead] = (tmp_path / "casewatch-stdin.dlq.jsonl").read_text().splitlines()
    assert json.loads(dead)["reason"] == "not_json"


def test_make_run_installs_the_package_and_the_broker_not_the_dev_tools(tmp_path: Path) -> None:
    # `make -n` prints what a fresh checkout would run, without running it.
    plan = subprocess.run(
        # --no-print-directory: under `make test` this make is a sub-make, which would print
        # "Entering directory" lines around the plan.
        ["make", "-n", "--no-print-directory", "run", f"VENV={tmp_path / 'venv'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    installs = [line for line in plan.splitlines() if "pip install" in line and "-e" in line]
    # setuptools' editable-install warning box silenced (tests/test_make_docs_and_run.py).
    quiet = 'PYTHONWARNINGS="ignore:Editable installation"'
    python = f"{tmp_path / 'venv'}/bin/python"
    assert installs == [f"{quiet} {python} -m pip install --quiet -e '.[broker]'"]
    assert "[dev]" not in plan
    assert plan.rstrip().endswith("casewatch demo")
