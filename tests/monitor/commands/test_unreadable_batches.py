"""A batch the daemon cannot read: `casewatch run` in a process without the zstd
library (tests/without_modules.py) meets a zstd batch on one partition of two.

The partition is held back on that batch, named (topic, partition, offset) in the log, in
/readyz and counted; the other partition goes on; nothing is committed past the unread batch;
SIGTERM is honoured within the shutdown budget; and a daemon with the library reads the held
batch after the restart, so nothing is lost.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from consumers._kafka import KafkaProducer
from consumers.tansu import EmbeddedBroker, create_topics, delete_topics, free_port
from monitor.config.settings import load_settings
from monitor.runtime.processes import spawn_logged
from monitor.storage.store import Store
from monitor.stream.shutdown_budget import shutdown_budget_s
from tests.fake_judge_server import FakeJudgeServer
from tests.fixtures.broker import DLQ_SUFFIX
from tests.fixtures.databases import make_turn
from tests.support.daemon import rows_per_event
from tests.support.daemon_process import EXIT_SLACK_S, daemon_process, kafka_config
from tests.support.http import http_get
from tests.support.kafka import committed_offset
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


@contextmanager
def daemon_without(modules: str, config: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`casewatch run` in a process where ``modules`` cannot be imported."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {"PYTHONUNBUFFERED": "1", "PYTHONPATH": path}
    with log.open("ab") as fh:
        command = [sys.executable, "-m", "tests.without_modules", modules, "run"]
        proc = spawn_logged([*command, "--config", str(config)], fh, env=env)
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture
def two_partitions(tansu_broker: EmbeddedBroker) -> Iterator[str]:
    topic = f"unreadable.{uuid.uuid4().hex[:12]}"
    create_topics(tansu_broker.bootstrap, [topic], 2, dlq_suffix=DLQ_SUFFIX)
    yield topic
    delete_topics(tansu_broker.bootstrap, [topic, f"{topic}{DLQ_SUFFIX}"])


def _send(bootstrap: str, topic: str, partition: int, ids: list[str], codec: str | None) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type=codec)
    try:
        futures = [
            producer.send(topic, value=make_turn(i).model_dump_json().encode(), partition=partition)
            for i in ids
        ]
        producer.flush(timeout=30)
        for future in futures:
            future.get(timeout=30)
    finally:
        producer.close(timeout=10)


def _metric(port: int, name: str, labels: str) -> float:
    _, text = http_get(port, "/metrics")
    for line in text.splitlines():
        if line.startswith(f"{name}{{") and labels in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_a_batch_without_its_codec_holds_its_partition_only_and_sigterm_is_honoured(
    tansu_broker: EmbeddedBroker, two_partitions: str, tmp_path: Path
) -> None:
    bootstrap, topic = tansu_broker.bootstrap, two_partitions
    plain0 = [f"p0-{i}" for i in range(20)]
    plain1, zstd1, after1 = (
        [f"p1-{i}" for i in range(10)],
        [f"z1-{i}" for i in range(10)],
        [f"a1-{i}" for i in range(5)],
    )
    _send(bootstrap, topic, 0, plain0, None)
    _send(bootstrap, topic, 1, plain1, None)
    _send(bootstrap, topic, 1, zstd1, "zstd")  # offsets 10..19 of partition 1
    _send(bootstrap, topic, 1, after1, None)
    port = free_port()
    with FakeJudgeServer() as judge:
        config, doc = kafka_config(tmp_path, bootstrap, topic, judge, port, drain_timeout_s=5)
        group = doc["kafka"]["group_id"]
        store = Store(doc["storage"]["url"])
        store.migrate()
        log = tmp_path / "without-zstd.log"
        with daemon_without("zstandard", config, log) as proc:
            wait_for(
                lambda: set(rows_per_event(store)) == set(plain0 + plain1),
                "readable stored",
            )
            unreadable = f'reason="codec_unavailable",topic="{topic}"'
            # Retried with backoff: a second failed attempt, and still nothing read past it.
            wait_for(
                lambda: _metric(port, "casewatch_unreadable_batches_total", unreadable) >= 2,
                "a retry of the unreadable batch",
            )
            status, body = http_get(port, "/readyz")
            assert status == 503, body
            ready = json.loads(body)
            assert ready["checks"]["partitions"] is False
            [stuck] = ready["unreadable_partitions"]
            assert stuck.startswith(f"{topic}/1 at offset 10 (codec_unavailable, ")
            assert "zstd" in stuck and "install" in stuck
            # The other partition goes on: new turns on it are judged while 1 is held.
            more0 = [f"p0-more-{i}" for i in range(5)]
            _send(bootstrap, topic, 0, more0, None)
            wait_for(lambda: set(more0) <= set(rows_per_event(store)), "partition 0 goes on")
            wait_for(lambda: committed_offset(bootstrap, group, topic, 0) == 25, "p0 end")
            assert committed_offset(bootstrap, group, topic, 1) == 10
            proc.send_signal(signal.SIGTERM)
            budget = shutdown_budget_s(load_settings(config))
            try:
                code = proc.wait(budget + EXIT_SLACK_S)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"SIGTERM not honoured; log:\n{log.read_text()}") from None
            assert code == 0, log.read_text()
        text = log.read_text(errors="replace")
        assert "unreadable record batch" in text
        line = next(x for x in text.splitlines() if "unreadable record batch" in x)
        assert topic in line and "UnsupportedCodecError" in line and "zstd" in line
        assert "Traceback" not in text
        # Nothing committed past the unread batch: a daemon with the library reads it now.
        assert committed_offset(bootstrap, group, topic, 1) == 10
        with daemon_process(config, tmp_path / "with-zstd.log") as proc2:
            wait_for(
                lambda: committed_offset(bootstrap, group, topic, 1) == 25,
                "partition 1 read to its end after the restart",
            )
            proc2.proc.send_signal(signal.SIGTERM)
            assert proc2.wait(60) == 0, proc2.tail()
        everything = plain0 + more0 + plain1 + zstd1 + after1
        assert rows_per_event(store) == dict.fromkeys(everything, 1)
        store.close()
