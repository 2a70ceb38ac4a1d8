"""The daemon under test as ``casewatch run``, a process of its own (signals, a kill and a
restart, its exit code): its configuration file and the running process, its log kept.

``tests.support.daemon`` runs it in a thread of the test's process instead.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from monitor.runtime.processes import spawn_logged
from tests.fake_judge_server import FakeJudgeServer
from tests.fixtures.broker import DLQ_SUFFIX
from tests.fixtures.judge_server import FAKE_JUDGE_KEY, FAKE_JUDGE_MODEL

# What a process may take beyond its shutdown budget to tear down (interpreter exit): with the
# budget, a liveness bound (the process ends), not a performance threshold.
EXIT_SLACK_S = 10.0


def _casewatch() -> list[str]:
    script = Path(sys.executable).with_name("casewatch")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "monitor.cli"]


class Proc:
    """``casewatch run --config config``, its output appended to ``log``; started through
    ``spawn_logged``, so it dies with the test run, a killed one included."""

    def __init__(self, config: Path, log: Path, *extra: str) -> None:
        self.log = log
        self._fh = log.open("ab")
        self.proc = spawn_logged(
            [*_casewatch(), "run", "--config", str(config), *extra],
            self._fh,
            env={"PYTHONUNBUFFERED": "1"},
        )

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"casewatch run did not exit; log:\n{self.tail()}") from None

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._fh.close()


@contextmanager
def daemon_process(config: Path, log: Path, *extra: str) -> Iterator[Proc]:
    """The process started; killed on the way out if it is still running."""
    proc = Proc(config, log, *extra)
    try:
        yield proc
    finally:
        proc.close()


def write_config(tmp_path: Path, doc: dict[str, Any]) -> Path:
    """``doc`` as a new YAML configuration file under ``tmp_path``."""
    path = tmp_path / f"casewatch-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def kafka_config(
    tmp_path: Path,
    bootstrap: str,
    topic: str,
    judge: FakeJudgeServer,
    port: int,
    drain_timeout_s: float = 20,
    judge_timeout_s: float = 10,
) -> tuple[Path, dict[str, Any]]:
    """A configuration file (and its content) for a daemon on ``topic`` judged by ``judge``,
    storing in SQLite under ``tmp_path``, its probes on ``port``."""
    key = tmp_path / "judge-key"  # keys come from files or the environment, not the config
    key.write_text(FAKE_JUDGE_KEY)
    doc: dict[str, Any] = {
        "kafka": {
            "bootstrap_servers": [bootstrap],
            "topics": [topic],
            "group_id": f"casewatch-cli-{uuid.uuid4().hex[:8]}",
            "dlq_suffix": DLQ_SUFFIX,
            "session_timeout_ms": 6000,
            "heartbeat_interval_ms": 1000,
            "max_poll_interval_ms": 6000,
            "max_poll_records": 20,
        },
        "judges": {
            "remote": {
                "kind": "openai",
                "base_url": judge.base_url,
                "model": FAKE_JUDGE_MODEL,
                "api_key_file": str(key),
                "timeout_seconds": judge_timeout_s,
            }
        },
        "judge": "remote",
        "storage": {"url": f"sqlite:///{tmp_path / 'casewatch.db'}"},
        "server": {"host": "127.0.0.1", "port": port},
        "daemon": {"concurrency": 4, "max_in_flight": 8, "drain_timeout_seconds": drain_timeout_s},
    }
    return write_config(tmp_path, doc), doc
