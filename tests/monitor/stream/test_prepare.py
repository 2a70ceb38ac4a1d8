"""Configuration is checked whole before any I/O: a bad judge key, sampling rule or rubric
judge ends ``casewatch run`` with exit 2 before the consumer reaches the broker and before the
database is created or migrated."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from monitor.cli import main

UNSET_KEY_ENV = "CASEWATCH_TEST_KEY_NOBODY_SETS"
RUBRIC = Path(__file__).resolve().parents[3] / "examples" / "rubric" / "rubrics.yaml"


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

BAD = {
    "a judge key that cannot be read": (
        {"judges": {"main": {**LLM_JUDGE, "api_key_env": UNSET_KEY_ENV}}, "judge": "main"},
        f"environment variable {UNSET_KEY_ENV} is not set",
    ),
    "a sampling rule on a field turns do not have": (
        {"sampling": {"always_judge": [{"name": "vip", "field": "tier", "equals": "gold"}]}},
        "sampling rule 'vip': unknown field 'tier'",
    ),
    "a storage URL of a database casewatch does not support": (
        {"storage": {"url": "mysql://root@127.0.0.1/casewatch"}},
        "unsupported database 'mysql'",
    ),
    "rubric grading by the offline heuristic judge": (
        {"rubric": {"enabled": True, "rubric_file": str(RUBRIC), "judge": "heuristic"}},
        "rubric questions are written and graded by an LLM",
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
    sections, message = BAD[case]
    config, db = _config(tmp_path, broker_socket, **sections)
    result = CliRunner().invoke(main, ["run", "--config", str(config)])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not _connected(broker_socket), "the consumer reached the broker first"
    assert not db.exists(), "the database was created (and migrated) first"
