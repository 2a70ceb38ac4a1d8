"""The command lines casewatch prints run as printed, in a shell whose PATH does not hold the
virtual environment (``make run`` never activates it): ``inspect turns``' ``details:`` hint,
``labels export``'s ``then:`` line (with the ``--db`` it was given) and ``casewatch broker``'s
"try, in another terminal" lines."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from monitor.cli import main
from monitor.storage.store import Store
from tests.fixtures.turns import seed_mixed

ROOT = Path(__file__).resolve().parents[3]
# PATH without the venv's bin/: what a shell has after `make run`.
SHELL_ENV = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")} | {
    "PATH": "/usr/local/bin:/usr/bin:/bin"
}


def _shell(line: str) -> subprocess.CompletedProcess[str]:
    """``line`` run by a shell in the checkout, as a person pasting it would."""
    return subprocess.run(  # noqa: S602 -- a printed line, run as a person would
        line, shell=True, cwd=ROOT, env=SHELL_ENV, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def in_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


@pytest.fixture
def sqlite_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "demo.db"
    store = Store(f"sqlite:///{path}")
    store.migrate()
    seed_mixed(store)
    store.close()
    yield path


def test_the_details_hint_of_inspect_turns_runs_as_printed(
    runner: CliRunner, in_checkout: None, sqlite_file: Path
) -> None:
    out = runner.invoke(main, ["inspect", "turns", "--db", str(sqlite_file)]).output
    (hint,) = [line for line in out.splitlines() if line.startswith("details: ")]
    line = hint.removeprefix("details: ").replace("EVENT_ID", "h-ok-1")
    assert not line.startswith("casewatch "), line  # `casewatch` is not on this PATH
    done = _shell(line)
    assert done.returncode == 0, done.stderr
    assert "h-ok-1" in done.stdout


def test_the_db_upgrade_an_unmigrated_database_asks_for_runs_as_printed(
    runner: CliRunner, in_checkout: None, tmp_path: Path
) -> None:
    db = tmp_path / "new.db"
    empty = Store(f"sqlite:///{db}")
    assert empty.revision() is None  # connects: SQLite creates the file, without the schema
    empty.close()
    out = runner.invoke(main, ["inspect", "turns", "--db", str(db)]).output
    (line,) = re.findall(r"run `([^`]+ db upgrade[^`]*)`", out)
    done = _shell(line)
    assert done.returncode == 0, done.stderr
    after = runner.invoke(main, ["inspect", "turns", "--db", str(db)])
    assert "holds no judged turn yet" in after.output  # migrated: the next step is the daemon


def test_labels_export_says_how_to_import_into_the_same_database(
    runner: CliRunner, in_checkout: None, sqlite_file: Path, tmp_path: Path
) -> None:
    out_file = tmp_path / "batch.jsonl"
    args = ["labels", "export", "--db", str(sqlite_file), "--assistant", "helpdesk"]
    result = runner.invoke(main, [*args, "--n", "2", "--seed", "1", "--out", str(out_file)])
    assert result.exit_code == 0, result.output
    (then,) = [line for line in result.output.splitlines() if line.startswith("then: ")]
    assert f"--db {shlex.quote(str(sqlite_file))}" in then
    lines = [json.loads(x) for x in out_file.read_text().splitlines()]
    for line in lines:
        line["labeller"], line["labels"] = "ana", {"turn_band": "none"}
    out_file.write_text("".join(json.dumps(x) + "\n" for x in lines))
    command = then.removeprefix("then: ").split(" (")[0].replace("FILE", shlex.quote(str(out_file)))
    done = _shell(command)
    assert done.returncode == 0, done.stderr
    assert "imported 2 label(s) on 2 turn(s)" in done.stdout


@pytest.mark.integration
def test_the_lines_casewatch_broker_prints_run_as_printed(tansu: None) -> None:
    broker = subprocess.Popen(
        [sys.executable, "-m", "monitor.cli", "broker", "--port", "0"],
        cwd=ROOT,
        env=SHELL_ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert broker.stdout is not None
        printed: list[str] = []
        for line in broker.stdout:  # ends at the run line, or at EOF if the broker died
            printed.append(line)
            if line.rstrip().endswith(" run"):
                break
        produce = next(line.strip() for line in printed if " produce " in line)
        run = printed[-1].strip()
        program = produce.split(" produce ")[0]
        assert program != "casewatch" and run.endswith(f"{program} run"), printed
        done = _shell(f"{produce} --count 3")
        assert done.returncode == 0, done.stderr
    finally:
        broker.terminate()
        broker.wait(30)
        if broker.stdout is not None:
            broker.stdout.close()
