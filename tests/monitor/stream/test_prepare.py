"""Configuration is checked whole before the first connection: a bad judge key, sampling rule,
rubric judge, storage URL (dialect, driver) or file a job is given (rubric set, probe set, judge
canary) ends ``casewatch run`` with exit 2 and one line before the consumer reaches the broker
and before the database is created or migrated."""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from monitor.cli import main

UNSET_KEY_ENV = "CASEWATCH_TEST_KEY_NOBODY_SETS"
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
RUBRIC = EXAMPLES / "rubric" / "rubrics.yaml"


@pytest.fixture
def broker_socket() -> Iterator[socket.socket]:
    """A listening socket standing in for the broker: any connection attempt lands in its
    backlog, where ``accept`` finds it."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        yield listener


def _connected(listener: socket.socket) -> bool:
    try:
        conn, _ = listener.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def _config(tmp_path: Path, listener: socket.socket, **sections: Any) -> tuple[Path, Path]:
    db = tmp_path / "casewatch.db"
    doc: dict[str, Any] = {
        "kafka": {
            "bootstrap_servers": [f"127.0.0.1:{listener.getsockname()[1]}"],
            "topics": ["turns"],
        },
        "storage": {"url": f"sqlite:///{db}"},
        "server": {"port": 0},
        **sections,
    }
    path = tmp_path / "casewatch.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path, db


LLM_JUDGE = {"kind": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
GRADER = {"judges": {"grader": LLM_JUDGE}}
BOT = {"name": "bot", "from_turns": True}
CANARY = (EXAMPLES / "judge_canary.jsonl").read_text().splitlines(keepends=True)


def _file(name: str, text: str | None = None) -> Callable[[Path], str]:
    """A file of the test's directory, written with ``text`` (None: left missing)."""

    def path(tmp: Path) -> str:
        if text is not None:
            (tmp / name).write_text(text)
        return str(tmp / name)

    return path


def _rubric(file: Callable[[Path], str]) -> Callable[[Path], dict[str, Any]]:
    return lambda tmp: {
        **GRADER,
        "rubric": {"enabled": True, "rubric_file": file(tmp), "judge": "grader"},
    }


def _probes(file: Callable[[Path], str]) -> Callable[[Path], dict[str, Any]]:
    return lambda tmp: {"baseline": {"enabled": True, "probes": file(tmp), "assistants": [BOT]}}


def _canary(file: Callable[[Path], str], **more: Any) -> Callable[[Path], dict[str, Any]]:
    return lambda tmp: {"judge_canary": {"file": file(tmp)}, **more}


def _given(sections: dict[str, Any]) -> Callable[[Path], dict[str, Any]]:
    return lambda tmp: sections


# case: (the config's sections, what the one line says, modules this environment lacks)
BAD: dict[str, tuple[Callable[[Path], dict[str, Any]], str, tuple[str, ...]]] = {
    "a judge key that cannot be read": (
        _given({"judges": {"main": {**LLM_JUDGE, "api_key_env": UNSET_KEY_ENV}}, "judge": "main"}),
        f"environment variable {UNSET_KEY_ENV} is not set",
        (),
    ),
    "a sampling rule on a field turns do not have": (
        _given(
            {"sampling": {"always_judge": [{"name": "vip", "field": "tier", "equals": "gold"}]}}
        ),
        "sampling rule 'vip': unknown field 'tier'",
        (),
    ),
    "a storage URL of a database casewatch does not support": (
        _given({"storage": {"url": "mysql://root@127.0.0.1/casewatch"}}),
        "unsupported database 'mysql'",
        (),
    ),
    "a PostgreSQL URL without its driver installed": (
        _given({"storage": {"url": "postgresql+psycopg://casewatch@127.0.0.1:5432/casewatch"}}),
        "needs the postgresql driver 'psycopg', which is not installed",
        ("psycopg",),
    ),
    "rubric grading by the offline heuristic judge": (
        _given({"rubric": {"enabled": True, "rubric_file": str(RUBRIC), "judge": "heuristic"}}),
        "rubric questions are written and graded by an LLM",
        (),
    ),
    "a rubric file that is not there": (
        _rubric(_file("rubrics.yaml")),
        "rubric.rubric_file: ",
        (),
    ),
    "a rubric file with an entry missing its query": (
        _rubric(_file("rubrics.yaml", "- id: a\n")),
        "line 1: query: Field required",
        (),
    ),
    "a probe set that is not there": (
        _probes(_file("probes.jsonl")),
        "baseline.probes: cannot read the probe set",
        (),
    ),
    "a probe set with a probe missing its answers": (
        _probes(_file("probes.jsonl", '{"id": "x"}\n')),
        "probes.jsonl:1: ",
        (),
    ),
    "a canary file that is not there": (
        _canary(_file("canary.jsonl")),
        "judge_canary.file: ",
        (),
    ),
    "a canary file with a line that is not JSON": (
        _canary(_file("canary.jsonl", "{not json\n")),
        "line 1: not JSON",
        (),
    ),
    "a canary file of one turn": (
        _canary(_file("canary.jsonl", CANARY[0])),
        "the file ends after 1 canary turn(s)",
        (),
    ),
    "a canary turn too large to redact for the judges": (
        _canary(_file("canary.jsonl", "".join(CANARY)), redaction={"max_chars": 10}),
        "is too large to redact",
        (),
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_setting_exits_2_before_the_broker_or_the_database(
    case: str,
    tmp_path: Path,
    broker_socket: socket.socket,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(UNSET_KEY_ENV, raising=False)
    sections, message, missing = BAD[case]
    for module in missing:  # as in an environment without it: every import of it fails
        monkeypatch.setitem(sys.modules, module, None)
    config, db = _config(tmp_path, broker_socket, **sections(tmp_path))
    result = CliRunner().invoke(main, ["run", "--config", str(config)])
    assert result.exit_code == 2, result.output
    # One line besides the daemon's JSON log lines: no traceback.
    lines = [x for x in result.output.strip().splitlines() if not x.startswith("{")]
    assert len(lines) == 1 and message in lines[0], result.output
    assert not _connected(broker_socket), "the consumer reached the broker first"
    assert not db.exists(), "the database was created (and migrated) first"
