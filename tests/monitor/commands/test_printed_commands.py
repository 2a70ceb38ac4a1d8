"""The command lines casewatch prints run as printed, in a shell whose PATH does not hold the
virtual environment (``make run`` never activates it): ``inspect turns``' ``details:`` hint,
``labels export``'s ``then:`` line (with the ``--db`` it was given) and ``casewatch broker``'s
"try, in another terminal" lines, which publish what the topic's format reads (OpenTelemetry
spans to an otlp topic, turn events to the others)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from consumers.otel.otlp import decode_spans
from monitor.cli import main
from monitor.commands.broker import topic_format, try_lines
from monitor.config.settings import Settings, load_settings
from monitor.storage.store import Store
from tests.fixtures.turns import seed_mixed
from tests.support.kafka import read_topic

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


@contextmanager
def _broker(*args: str) -> Iterator[list[str]]:
    """``casewatch broker --port 0 ARGS`` running; what it printed up to its run line."""
    broker = subprocess.Popen(
        [sys.executable, "-m", "monitor.cli", "broker", "--port", "0", *args],
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
        yield printed
    finally:
        broker.terminate()
        broker.wait(30)
        if broker.stdout is not None:
            broker.stdout.close()


def _settings_of(line: str, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The settings a printed ``VAR=value ... casewatch run`` line gives the daemon."""
    for word in shlex.split(line):
        if "=" not in word:
            break
        name, value = word.split("=", 1)
        monkeypatch.setenv(name, value)
    return load_settings()


@pytest.mark.integration
def test_the_lines_casewatch_broker_prints_run_as_printed(tansu: None) -> None:
    with _broker() as printed:
        assert printed[0].startswith("broker listening on "), printed
        produce = next(line.strip() for line in printed if " produce " in line)
        run = printed[-1].strip()
        program = produce.split(" produce ")[0]
        assert program != "casewatch" and run.endswith(f"{program} run"), printed
        assert "examples/turns.jsonl" in produce and "turn events" in "".join(printed)
        done = _shell(f"{produce} --count 3")
        assert done.returncode == 0, done.stderr


@pytest.mark.integration
def test_an_otlp_topic_gets_spans_it_can_read_not_turn_events(
    tansu: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An otlp topic's name is enough: the broker suggests the OpenTelemetry example (OTLP
    protobuf, one message per trace) and a run line that reads the topic as otlp_proto."""
    topic = f"otlp_spans.printed.{os.getpid()}"
    with _broker("--topic", topic) as printed:
        assert "examples/turns.jsonl" not in "".join(printed), printed
        publish = printed[-2].strip()
        assert publish.split()[0] == ".venv/bin/python", publish  # python is not the venv's
        address = printed[0].split()[-1]
        done = _shell(publish)
        assert done.returncode == 0, done.stderr
        records = read_topic(address, topic, 2)
        traces = [decode_spans(r.value, "otlp_proto", 1 << 24) for r in records]
        assert len(traces) == 2 and all(traces), printed  # two traces: one turn per convention
        settings = _settings_of(printed[-1].strip(), monkeypatch)
        assert settings.kafka.topic_formats == {topic: "otlp_proto"}
        assert settings.kafka.bootstrap_servers == [address]
        assert settings.sampling.default_rate == 1.0  # the example's two turns are judged


def test_the_topic_format_comes_from_the_option_else_from_the_name() -> None:
    assert topic_format("support.turns", None) == "casewatch"
    assert topic_format("otlp_spans", None) == "otlp_proto"
    assert topic_format("otlp_spans_json", None) == "otlp_json"
    assert topic_format("traces", "otlp_json") == "otlp_json"
    (publish,) = [x for x in try_lines("h:1", "traces", "otlp_json") if " produce " in x]
    assert "--out spans.jsonl && " in publish and "produce spans.jsonl --topic traces" in publish
