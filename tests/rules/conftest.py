"""Fixtures shared by the live rules tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from consumers.tansu import EmbeddedBroker
from monitor.stream.runner import DaemonRunner
from tests.support.daemon import kafka_settings


@pytest.fixture
def start_daemon(
    tansu_broker: EmbeddedBroker, kafka_topic: str, tmp_path: Path
) -> Iterator[Callable[..., DaemonRunner]]:
    """Starts the daemon as ``casewatch run`` does (DaemonRunner) on ``kafka_topic``, judging
    every turn into SQLite, its probes on a free port; ``overrides`` are settings sections.
    Each one started must stop when the test ends."""
    started: list[DaemonRunner] = []

    def start(**overrides: Any) -> DaemonRunner:
        settings = kafka_settings(
            tansu_broker.bootstrap,
            kafka_topic,
            f"sqlite:///{tmp_path / 'casewatch.db'}",
            server={"host": "127.0.0.1", "port": 0},
            sampling={"default_rate": 1.0},
            **overrides,
        )
        runner = DaemonRunner(settings, CollectorRegistry()).start()
        started.append(runner)
        return runner

    yield start
    for runner in started:
        assert runner.stop(timeout_s=60)
