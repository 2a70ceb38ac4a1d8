"""/healthz during a rebalance: a poll legitimately blocked in a group join must not
fail liveness, or Kubernetes restarts a healthy pod mid-rebalance; a poll stuck past the join's
own bound still does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from consumers.dlq import FileDeadLetterSink
from consumers.records import RawMessage, TopicPartition
from monitor.config.settings import load_settings
from monitor.judging.evaluator import build_evaluator
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.storage.store import Store
from monitor.stream.daemon import HEARTBEAT_MAX_AGE_S, Daemon
from monitor.stream.http import Heartbeat
from tests.support.daemon import build_daemon, close_opened

MAX_POLL_INTERVAL_MS = 300_000  # Kafka's default: a join may block ~305 s


class JoiningSource:
    """A turn source whose first poll blocks as kafka-python's does in a long group join: the
    clock moves by ``block_s`` inside the call, and the liveness answer is read from there."""

    def __init__(self, clock: ManualClock, heartbeat: Heartbeat, block_s: float) -> None:
        self.clock = clock
        self.heartbeat = heartbeat
        self.block_s = block_s
        self.during: tuple[bool, str] | None = None
        self.daemon: Daemon | None = None

    def poll(
        self, timeout_s: float, max_records: int, *, join_limit_s: float | None = None
    ) -> list[RawMessage]:
        if self.during is None:
            self.clock.advance(self.block_s)
            self.during = self.heartbeat.status()
        assert self.daemon is not None
        self.daemon.stop()
        return []

    def commit(self, offsets: Any, timeout_s: float | None = None) -> None:
        return None

    def pause(self, tps: Any) -> None:
        return None

    def resume(self, tps: Any) -> None:
        return None

    def paused(self) -> set[TopicPartition]:
        return set()

    def assignment(self) -> set[TopicPartition]:
        return set()

    def lag(self) -> dict[TopicPartition, int]:
        return {}

    def set_rebalance_listener(self, on_assigned: Any, on_revoked: Any) -> None:
        return None

    def ping(self) -> bool:
        return True

    def close(self) -> None:
        return None


def _status_inside_a_blocked_poll(tmp_path: Path, block_s: float) -> tuple[bool, str]:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    settings = load_settings(
        None, storage={"url": url}, kafka={"max_poll_interval_ms": MAX_POLL_INTERVAL_MS}
    )
    store = Store(url)
    store.migrate()
    clock = ManualClock()
    heartbeat = Heartbeat(HEARTBEAT_MAX_AGE_S, clock)
    source = JoiningSource(clock, heartbeat, block_s)
    dlq, evaluator = (
        FileDeadLetterSink(tmp_path / "dlq.jsonl"),
        build_evaluator(settings, concurrency=settings.daemon.concurrency),
    )
    daemon = build_daemon(
        settings,
        source,
        dlq,
        store,
        evaluator,
        Metrics(CollectorRegistry()),
        clock,
        heartbeat=heartbeat,
    )
    source.daemon = daemon
    try:
        daemon.run()
    finally:
        daemon.close()
        close_opened(source, dlq, store, evaluator)
    assert source.during is not None
    return source.during


def test_a_poll_blocked_in_a_long_group_join_is_still_alive(tmp_path: Path) -> None:
    # Three times the heartbeat's own limit, well inside max.poll.interval + 5 s.
    alive, reason = _status_inside_a_blocked_poll(tmp_path, 3 * HEARTBEAT_MAX_AGE_S)
    assert alive, reason


def test_a_poll_blocked_past_the_join_bound_fails_liveness(tmp_path: Path) -> None:
    alive, reason = _status_inside_a_blocked_poll(tmp_path, MAX_POLL_INTERVAL_MS / 1000 + 60)
    assert not alive
    assert "last ticked" in reason


def test_the_excuse_ends_with_the_blocking_call() -> None:
    clock = ManualClock()
    heartbeat = Heartbeat(10, clock)
    heartbeat.tick()
    with heartbeat.excused(100):
        clock.advance(50)
        assert heartbeat.status()[0]
    clock.advance(11)  # the call returned (and ticked); the loop then stalls
    assert not heartbeat.status()[0]
