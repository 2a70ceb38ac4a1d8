"""A broker on this machine that is not running is said at once: a refused connection to a
loopback port is a BrokerError naming it, after a short grace rather than the whole connect
timeout (30 s by default), and through `casewatch run` one line with exit 2."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from consumers._kafka import require_reachable
from consumers.kafka_source import KafkaTurnSource
from monitor.config.kafka import KafkaConfig
from monitor.errors import BrokerError

# Far above the grace: a refused local port must not wait for it.
CONNECT_TIMEOUT_S = 600.0


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_refused_local_port_says_nothing_listens_there() -> None:
    server = f"127.0.0.1:{_closed_port()}"
    with pytest.raises(BrokerError) as info:
        require_reachable([server], CONNECT_TIMEOUT_S)
    message = str(info.value)
    assert f"({server}): connection refused, nothing listens there" in message
    assert "\n" not in message


def test_localhost_counts_as_this_machine() -> None:
    with pytest.raises(BrokerError, match="connection refused"):
        require_reachable([f"localhost:{_closed_port()}"], CONNECT_TIMEOUT_S)


def test_the_source_fails_on_a_refused_local_port() -> None:
    cfg = KafkaConfig(bootstrap_servers=[f"127.0.0.1:{_closed_port()}"])
    with pytest.raises(BrokerError, match="connection refused"):
        KafkaTurnSource(cfg, connect_timeout_s=CONNECT_TIMEOUT_S)


def test_casewatch_run_reports_it_on_one_line(tmp_path: Path) -> None:
    config = tmp_path / "casewatch.yaml"
    config.write_text(
        f"kafka:\n  bootstrap_servers: ['127.0.0.1:{_closed_port()}']\n"
        f"storage:\n  url: sqlite:///{tmp_path / 'c.db'}\n"
        "server:\n  port: 0\n",
        encoding="utf-8",
    )
    result = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "run", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=CONNECT_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    said = [line for line in result.stderr.splitlines() if "connection refused" in line]
    assert len(said) == 1 and said[0].startswith("casewatch: "), result.stderr[-2000:]
    assert "Traceback" not in result.stderr
