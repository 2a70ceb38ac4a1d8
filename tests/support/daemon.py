"""The daemon under test, in a thread of the test's process: its settings on a topic, a
``running`` harness (its own registry and probe server, stopped and closed on the way out),
turns to feed it and what it stored.

``tests.support.daemon_process`` runs it as ``casewatch run`` in a process of its own instead.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from prometheus_client import CollectorRegistry

from consumers.broker_quirks import BrokerQuirksSetting
from consumers.dlq import DeadLetterSink
from consumers.source import TurnSource
from monitor.config.kafka import KafkaConfig
from monitor.config.settings import Settings, load_settings
from monitor.judging.evaluator import Evaluator, build_evaluator
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import Clock, SystemClock
from monitor.sampling.sampler import Sampler
from monitor.storage.audit import stored_verdicts
from monitor.storage.store import Store
from monitor.stream.daemon import Daemon
from monitor.stream.http import Heartbeat, ProbeApp, ProbeServer
from monitor.stream.prepare import stream_sampler
from monitor.stream.runner import stream_daemon
from tests.fixtures.broker import DLQ_SUFFIX
from tests.fixtures.databases import make_turn


def kafka_settings(
    bootstrap: str,
    topic: str,
    db_url: str,
    *,
    broker_quirks: BrokerQuirksSetting = "none",
    **overrides: Any,
) -> Settings:
    """Settings of a daemon on ``topic``. The broker quirks are off unless ``broker_quirks``
    says: the daemon is a plain Kafka consumer on whichever broker (the Tansu-quirks tests
    turn them on themselves; a test whose members leave mid-rebalance on any broker passes
    ``auto``, as a user's deployment would)."""
    kafka = KafkaConfig(
        bootstrap_servers=[bootstrap],
        topics=[topic],
        group_id=f"casewatch-test-{uuid.uuid4().hex[:8]}",
        dlq_suffix=DLQ_SUFFIX,
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
        max_poll_interval_ms=6000,
        max_poll_records=50,
        broker_quirks=broker_quirks,
    )
    values: dict[str, Any] = {"kafka": kafka, "storage": {"url": db_url}}
    values.update(overrides)
    return load_settings(None, **values)


def build_daemon(
    settings: Settings,
    source: TurnSource,
    dlq: DeadLetterSink,
    store: Store,
    evaluator: Evaluator,
    metrics: Metrics,
    clock: Clock | None = None,
    *,
    heartbeat: Heartbeat | None = None,
    exit_when_idle: bool = False,
    sampler: Sampler | None = None,
) -> Daemon:
    """``stream_daemon`` as the runner calls it, with the daemon's sampler on the test's clock
    (or ``sampler``, when the test reads its budget)."""
    clock = clock or SystemClock()
    return stream_daemon(
        settings,
        source,
        dlq,
        store,
        evaluator,
        metrics,
        sampler or stream_sampler(settings, clock),
        clock,
        heartbeat=heartbeat,
        exit_when_idle=exit_when_idle,
    )


class Harness:
    """A Daemon running in a thread, with its own registry and HTTP server."""

    def __init__(self, settings: Settings, source: TurnSource, dlq: Any, store: Store) -> None:
        self.registry = CollectorRegistry()
        self.metrics = Metrics(self.registry)
        self.store = store
        self.evaluator = build_evaluator(settings, concurrency=settings.daemon.concurrency)
        self.opened = (source, dlq, store, self.evaluator)
        self.sampler = stream_sampler(settings, SystemClock())
        self.daemon = build_daemon(
            settings, source, dlq, store, self.evaluator, self.metrics, sampler=self.sampler
        )
        app = ProbeApp(self.registry, self.daemon.heartbeat, self.daemon.checks())
        self.server = ProbeServer(app, "127.0.0.1", 0)
        self.thread = threading.Thread(target=self.daemon.run, name="daemon", daemon=True)

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float:
        return self.registry.get_sample_value(name, labels or {}) or 0.0


class Closeable(Protocol):
    def close(self) -> None: ...


def close_opened(*opened: Closeable) -> None:
    """Close what a test opened for its daemon, last first (the daemon closes only what it
    owns: its pipeline and sender)."""
    for resource in reversed(opened):
        resource.close()


@contextmanager
def running(settings: Settings, source: TurnSource, dlq: Any, store: Store) -> Iterator[Harness]:
    """The daemon started; on the way out stopped (it must stop), its server and it closed."""
    h = Harness(settings, source, dlq, store)
    h.server.start()
    h.thread.start()
    try:
        yield h
    finally:
        h.daemon.stop()
        h.thread.join(timeout=60)
        assert not h.thread.is_alive(), "daemon did not stop"
        h.server.close()
        h.daemon.close()
        close_opened(*h.opened)
    # Every sampled turn's reservation was settled: judged, dropped or abandoned at the stop
    # (an abandoned call settles when it ends). Not checked when the test itself failed.
    if h.daemon.abandoned_calls == 0:
        reserved = h.sampler.budget.state()["calls"].reserved
        assert reserved == 0, f"the stopped daemon left {reserved:g} judge calls reserved"


def turn_values(n: int, prefix: str = "evt") -> list[bytes]:
    """``n`` valid turns as a producer writes them: event ids ``{prefix}-0`` and on."""
    return [make_turn(f"{prefix}-{i}").model_dump_json().encode() for i in range(n)]


def rows_per_event(store: Store) -> dict[str, int]:
    """How many verdict rows the store holds for each event id (exactly once: 1 each)."""
    counts: dict[str, int] = {}
    for row in stored_verdicts(store, limit=100_000):
        counts[row["event_id"]] = counts.get(row["event_id"], 0) + 1
    return counts
