"""The drain after a stop keeps the consumer in its group (``monitor/stream/drain.py``).

Kafka's semantics: a member that does not poll within ``max_poll_interval_ms`` leaves its group
(kafka-python's heartbeat thread sends LeaveGroup and forgets the generation), and a commit it
makes after that is refused. A drain that outlasts the interval must still commit what it
finished, so a restart reads none of it again. While it polls, the drain reads nothing new: a
partition a rebalance assigns meanwhile is paused and what it delivered first is neither judged
nor committed; a revocation commits the revoked partitions' finished turns; a file source reads
no line appended meanwhile.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from consumers.dlq import FileDeadLetterSink, KafkaDeadLetterQueue
from consumers.file_source import FILE_TP, FileTurnSource
from consumers.kafka_source import KafkaTurnSource
from consumers.records import RawMessage, TopicPartition
from consumers.source import TurnSource
from monitor.config.settings import Settings, load_settings
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import Deadline, ManualClock
from monitor.storage.store import Store
from monitor.stream.daemon import Daemon
from monitor.stream.drain import Drain
from monitor.stream.http import Heartbeat
from tests.fake_judge_server import FakeJudgeServer
from tests.fixtures.broker import ContractBroker, produce
from tests.fixtures.judge_server import fake_judge_config
from tests.monitor.stream.steps.helpers import GatedEvaluator
from tests.support.daemon import (
    build_daemon,
    close_opened,
    kafka_settings,
    rows_per_event,
    running,
    turn_values,
)
from tests.support.kafka import committed_offset
from tests.support.memory_source import MemorySource
from tests.support.waiting import wait_for

MAX_POLL_INTERVAL_MS = 3000
# Every judge call outlasts the poll interval three times over: a drain that waits for the
# calls under way at the stop lasts longer than the interval, however the machine is loaded.
JUDGE_LATENCY_S = 3 * MAX_POLL_INTERVAL_MS / 1000


def _settings(bootstrap: str, topic: str, url: str, judge: FakeJudgeServer, n: int) -> Settings:
    config = fake_judge_config(judge, timeout_seconds=10 * JUDGE_LATENCY_S, transport_retries=0)
    settings = kafka_settings(
        bootstrap,
        topic,
        url,
        judges={"remote": config},
        judge="remote",
        # Every turn judged at once; nothing committed before the stop but by the drain.
        daemon={
            "concurrency": n,
            "drain_timeout_seconds": 10 * JUDGE_LATENCY_S,
            "commit_interval_seconds": 3600,
        },
    )
    kafka = settings.kafka.model_copy(update={"max_poll_interval_ms": MAX_POLL_INTERVAL_MS})
    return settings.model_copy(update={"kafka": kafka})


@pytest.mark.integration
def test_a_drain_longer_than_the_poll_interval_still_commits_what_it_finished(
    kafka_broker: ContractBroker, contract_topic: str, tmp_path: Path
) -> None:
    """Contract suite: every broker of ``kafka_broker``, broker quirks off."""
    bootstrap, kafka_topic = kafka_broker.bootstrap, contract_topic
    n = 5
    produce(bootstrap, kafka_topic, turn_values(n, "d"))
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    Store(url).migrate()
    with FakeJudgeServer(latency=JUDGE_LATENCY_S) as judge:
        settings = _settings(bootstrap, kafka_topic, url, judge, n)
        group, kafka = settings.kafka.group_id, settings.kafka
        store = Store(url)
        with running(settings, KafkaTurnSource(kafka), KafkaDeadLetterQueue(kafka), store) as h:
            wait_for(lambda: judge.request_count == n, what="every turn being judged")
            h.daemon.stop()  # the drain now waits out the judge calls
            wait_for(lambda: h.daemon.wait_finished(0), what="the drain over")
            assert h.daemon.final_commit_error is None
        # Every turn was finished by the drain, stored, and its offset committed.
        assert rows_per_event(Store(url)) == {f"d-{i}": 1 for i in range(n)}
        assert committed_offset(bootstrap, group, kafka_topic) == n

        # A restart in the same group reads nothing again, so judges nothing again.
        store = Store(url)
        with running(settings, KafkaTurnSource(kafka), KafkaDeadLetterQueue(kafka), store) as h:
            lag = {"topic": kafka_topic, "partition": "0"}
            wait_for(
                lambda: h.registry.get_sample_value("casewatch_consumer_lag", lag) == 0,
                what="the restarted consumer at the end of the partition",
            )
            consumed = h.sample("casewatch_turns_consumed_total", {"topic": kafka_topic})
        assert consumed == 0
        assert judge.request_count == n


# ---------------------------------------------------------------- what the drain's polls read


class CountingFileSource(FileTurnSource):
    """A file source that counts its polls (the drain's included)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.polls = 0

    def poll(
        self, timeout_s: float, max_records: int, *, join_limit_s: float | None = None
    ) -> list[RawMessage]:
        self.polls += 1
        return super().poll(timeout_s, max_records, join_limit_s=join_limit_s)


class Running:
    """A daemon on ``source`` with a judge held at its gate, run in a thread."""

    def __init__(self, tmp_path: Path, source: TurnSource) -> None:
        url = f"sqlite:///{tmp_path / 'db.sqlite'}"
        settings = load_settings(
            None,
            storage={"url": url},
            daemon={"commit_interval_seconds": 3600, "revoke_timeout_seconds": 60},
            # The revoke wait is capped at a quarter of this: keep the cap out of the way.
            kafka={"max_poll_interval_ms": 600_000},
        )
        self.store = Store(url)
        self.store.migrate()
        self.source = source
        self.evaluator = GatedEvaluator(open_gate=False)
        self.registry = CollectorRegistry()
        self.dlq = FileDeadLetterSink(tmp_path / "dlq.jsonl")
        self.daemon: Daemon = build_daemon(
            settings, source, self.dlq, self.store, self.evaluator, Metrics(self.registry)
        )
        self.thread = threading.Thread(target=self.daemon.run, name="daemon", daemon=True)

    def __enter__(self) -> Running:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.evaluator.gate.set()
        self.daemon.stop()
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), "daemon did not stop"
        self.daemon.close()
        close_opened(self.source, self.dlq, self.store)

    def stop_while_judging(self, n: int, paused: set[TopicPartition]) -> None:
        """Stop once ``n`` turns are being judged; return once the drain paused ``paused``."""
        wait_for(lambda: self.evaluator.calls == n, what=f"{n} turns being judged")
        self.daemon.stop()
        wait_for(lambda: self.source.paused() == paused, what="the drain pausing the source")

    def finish(self) -> None:
        self.evaluator.gate.set()
        wait_for(lambda: self.daemon.wait_finished(0), what="the drain over")

    def consumed(self, topic: str) -> float:
        value = self.registry.get_sample_value("casewatch_turns_consumed_total", {"topic": topic})
        return value or 0.0


def test_records_a_rebalance_delivers_during_the_drain_are_neither_judged_nor_committed(
    tmp_path: Path,
) -> None:
    tp0, tp1 = TopicPartition("turns", 0), TopicPartition("turns", 1)
    source = MemorySource({tp0: turn_values(3, "a")})
    with Running(tmp_path, source) as run:
        run.stop_while_judging(3, {tp0})
        # A rebalance hands this consumer a partition: its first poll reads it, unpaused.
        source.assign_next_poll(tp1, turn_values(2, "b"))
        wait_for(lambda: source.position.get(tp1) == 2, what="the new partition's records read")
        wait_for(lambda: source.paused() == {tp0, tp1}, what="the new partition paused")
        run.finish()
        assert run.daemon.final_commit_error is None
        assert source.committed == {tp0: 3}
        assert run.evaluator.calls == 3
        assert run.consumed("turns") == 3
        assert rows_per_event(run.store) == {f"a-{i}": 1 for i in range(3)}


def test_a_revoke_during_the_drain_commits_the_turns_judged_for_the_revoked_partitions(
    tmp_path: Path,
) -> None:
    tp = TopicPartition("turns", 0)
    source = MemorySource({tp: turn_values(3)})
    with Running(tmp_path, source) as run:
        run.stop_while_judging(3, {tp})
        source.revoke_next_poll.set()
        # The drain's next poll revokes; the revoke waits on the judge: let it answer.
        wait_for(source.revoking.is_set, what="the revoke under way")
        run.evaluator.gate.set()
        wait_for(lambda: source.committed_at_revoke is not None, what="the revoke over")
        run.finish()
        # Committed inside the revoke, before the partition could move.
        assert source.committed_at_revoke == {tp: 3}
        assert run.registry.get_sample_value("casewatch_revoke_abandoned_total") == 0
        assert run.evaluator.calls == 3


def test_a_followed_file_reads_no_line_appended_during_the_drain(tmp_path: Path) -> None:
    data = tmp_path / "turns.jsonl"
    data.write_bytes(b"".join(v + b"\n" for v in turn_values(3, "f")))
    offsets = tmp_path / "turns.offsets"
    source = CountingFileSource(data, follow=True, offsets_path=offsets)
    with Running(tmp_path, source) as run:
        run.stop_while_judging(3, {FILE_TP})
        with data.open("ab") as fh:
            fh.write(b"".join(v + b"\n" for v in turn_values(2, "g")))
        polled = source.polls
        wait_for(lambda: source.polls >= polled + 2, what="the drain polling after the append")
        run.finish()
        assert run.consumed("file") == 3
        assert source.committed == 3
        assert rows_per_event(run.store) == {f"f-{i}": 1 for i in range(3)}


# ---------------------------------------------------------------- the drain's deadline

JOIN_S = 35.0  # a group join the broker holds open: up to max.poll.interval + 5 s


class JoiningSource(CountingFileSource):
    """A source whose every poll lands in a group join that takes ``JOIN_S``, as a keep-alive
    poll does when another member joins while this one drains: the poll waits for the join up
    to the limit it is given (the source's own JoinGroup timeout without one)."""

    def __init__(self, clock: ManualClock, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.clock = clock
        self.limits: list[tuple[float | None, float]] = []  # (limit given, drain time left)
        self.deadline: Deadline | None = None

    def poll(
        self, timeout_s: float, max_records: int, *, join_limit_s: float | None = None
    ) -> list[RawMessage]:
        assert self.deadline is not None
        self.limits.append((join_limit_s, self.deadline.remaining() or 0.0))
        self.clock.advance(JOIN_S if join_limit_s is None else min(JOIN_S, join_limit_s))
        return super().poll(0.0, max_records, join_limit_s=join_limit_s)


class NeverDone:
    """A pipeline whose judge call outlasts any drain (``Draining``)."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock

    def poll(self) -> None:
        return None

    def wait_progress(self, timeout: float) -> bool:
        self.clock.advance(timeout)
        return True

    @property
    def unfinished(self) -> int:
        return 1


def test_a_keep_alive_poll_that_lands_in_a_join_waits_no_longer_than_the_drain_has_left(
    tmp_path: Path,
) -> None:
    # Without the limit the poll waited for the whole join, 35 s past a 10 s drain: the stop
    # outlasted its budget and the watchdog ended the process with exit 1.
    clock = ManualClock()
    path = tmp_path / "turns.jsonl"
    path.write_text("")
    source = JoiningSource(clock, path)
    deadline = Deadline(10.0, clock)
    source.deadline = deadline
    drain = Drain(
        source,
        NeverDone(clock),
        clock,
        Heartbeat(60.0, clock),
        after_poll=lambda: None,
        poll_block_s=JOIN_S,
        max_records=500,
    )
    started = clock.monotonic()
    try:
        drain.finish(deadline)
    finally:
        source.close()
    assert source.limits, "the drain kept the consumer polled"
    assert all(limit is not None and limit <= left for limit, left in source.limits)
    assert clock.monotonic() - started == pytest.approx(10.0)  # ended at its deadline
