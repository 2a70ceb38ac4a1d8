"""The hourly judge budget across rebalances: every reservation a dropped turn made comes back,
so judging goes on after partitions move, and the budget's gauges show it.

The first test moves one partition away and back three times while turns queue behind a judge
that does not answer (the in-memory source, the daemon's own loop); the second runs two
daemons joining and leaving one group on a real broker under load.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from consumers.dlq import FileDeadLetterSink, KafkaDeadLetterQueue
from consumers.kafka_source import KafkaTurnSource
from consumers.records import TopicPartition
from consumers.tansu import create_topics
from monitor.config.settings import load_settings
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import SystemClock
from monitor.sampling.sampler import Sampler
from monitor.storage.store import Store
from monitor.stream.daemon import Daemon
from monitor.stream.prepare import stream_sampler
from tests.fake_judge_server import FakeJudgeServer
from tests.fixtures.broker import DLQ_SUFFIX, ContractBroker, produce
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

pytestmark = pytest.mark.integration

CALLS = {"unit": "calls"}
SAMPLED = {"assistant": "helpdesk", "reason": "rate"}


def gauge(registry: CollectorRegistry, name: str) -> float | None:
    return registry.get_sample_value(f"casewatch_judge_budget_{name}", CALLS)


@contextmanager
def _daemon(
    daemon: Daemon, evaluator: GatedEvaluator, *opened: MemorySource | FileDeadLetterSink | Store
) -> Iterator[None]:
    thread = threading.Thread(target=daemon.run, name="daemon", daemon=True)
    thread.start()
    try:
        yield
    finally:
        evaluator.gate.set()
        daemon.stop()
        thread.join(timeout=60)
        daemon.close()
        close_opened(*opened)


def test_turns_dropped_at_rebalances_give_their_budget_back_and_judging_goes_on(
    tmp_path: Path,
) -> None:
    n = 30
    # GatedEvaluator's verdicts carry four judge requests (two judgments of two attempts):
    # the budget holds the stream's real spend and a few calls more, far less than the turns
    # each rebalance drops from the queues. A dropped turn's reservation that did not come
    # back would leave the last turns refused (``budget_calls``).
    budget = 4 * n + 6
    tp = TopicPartition("turns", 0)
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    settings = load_settings(
        None,
        storage={"url": url},
        daemon={
            "concurrency": 2,
            "max_in_flight": 6,
            "commit_interval_seconds": 0.01,
            "revoke_timeout_seconds": 60,
        },
        # The revoke wait is capped at a quarter of this: keep the cap out of the way.
        kafka={"max_poll_interval_ms": 600_000},
        sampling={
            "default_rate": 1.0,
            "budget_calls_per_hour": budget,
            "budget_usd_per_hour": None,
        },
    )
    store = Store(url)
    store.migrate()
    source = MemorySource({tp: turn_values(n)})
    registry = CollectorRegistry()
    evaluator = GatedEvaluator(open_gate=False)
    sampler: Sampler = stream_sampler(settings, SystemClock())
    dlq = FileDeadLetterSink(tmp_path / "dlq.jsonl")
    daemon = build_daemon(
        settings, source, dlq, store, evaluator, Metrics(registry), sampler=sampler
    )
    with _daemon(daemon, evaluator, source, dlq, store):
        for rebalance in range(3):
            # Two calls under way, the look-up's and the judge's queues full behind them.
            wait_for(
                lambda: (gauge(registry, "reserved") or 0) >= 10,
                what=f"turns queued behind the judge ({rebalance})",
            )
            source.rebalance_completes.clear()
            source.next_owned = set()  # the partition goes to another consumer
            source.revoked.clear()
            source.revoke_next_poll.set()
            wait_for(source.revoking.is_set, what="revoke started")
            source.revoking.clear()
            evaluator.gate.set()  # the calls under way finish and are committed in the revoke
            wait_for(source.revoked.is_set, what="revoke finished")
            evaluator.gate.clear()
            source.rebalance_completes.set()
            wait_for(lambda: daemon.tracker.partitions() == set(), what="the partition dropped")
            # Everything the queued turns reserved is back: nothing runs, nothing is held.
            wait_for(lambda: gauge(registry, "reserved") == 0, what="reservations returned")
            source.assign_next_poll(tp)  # it comes back: read again from the commit
        evaluator.gate.set()
        wait_for(lambda: source.committed.get(tp) == n, what="every turn committed")
        wait_for(lambda: gauge(registry, "reserved") == 0, what="reservations settled")
        skipped = registry.get_sample_value(
            "casewatch_turns_skipped_total", {"assistant": "helpdesk", "reason": "budget_calls"}
        )
        spent, limit = gauge(registry, "spent"), gauge(registry, "limit")
    assert rows_per_event(Store(url)) == {f"evt-{i}": 1 for i in range(n)}
    assert skipped in (None, 0.0)
    assert evaluator.calls == n  # the turns dropped were judged once, after coming back
    assert spent == 4 * n and limit == budget
    assert sampler.budget.state()["calls"].reserved == 0


@pytest.mark.deviates(
    "noida", "refuses a commit made in on_revoked during a rebalance (IllegalGeneration, 22)"
)
def test_members_joining_and_leaving_under_load_strand_no_budget(
    kafka_broker: ContractBroker, tmp_path: Path
) -> None:
    """Contract suite: two daemons of one group on a four-partition topic, a slow judge, a
    finite budget; B joins and leaves twice while A judges. Each replica's reserved gauge
    returns to 0 and every turn is judged, none refused by the budget.

    The broker quirks are ``auto``, as in a deployment: B leaves while rebalances are forming,
    and Tansu 0.6 can then keep the departed B as the leader of a round that never forms
    (docs/kafka.md, "Broker quirks"); as a plain Kafka consumer A would wait on it for ever.
    On any other broker ``auto`` is ``none``. While B joins, the judge slows down so that A
    cannot finish the partitions B is about to be given: B must find turns to read."""
    bootstrap = kafka_broker.bootstrap
    topic = f"test.budget.{uuid.uuid4().hex[:8]}"
    partitions, per_partition = 4, 100
    n = partitions * per_partition
    create_topics(bootstrap, [topic], partitions=partitions, dlq_suffix=DLQ_SUFFIX)
    for p in range(partitions):
        produce(bootstrap, topic, turn_values(per_partition, f"p{p}"), partition=p)
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    Store(url).migrate()
    skip = {"assistant": "helpdesk", "reason": "budget_calls"}
    with FakeJudgeServer(latency=0.05) as judge:
        settings = kafka_settings(
            bootstrap,
            topic,
            url,
            broker_quirks="auto",
            judges={"remote": fake_judge_config(judge)},
            judge="remote",
            daemon={"concurrency": 2, "max_in_flight": 32},
            # One call a turn, plus a margin far below what the rebalances drop from the
            # queues: a stranded reservation would show as turns refused.
            sampling={
                "default_rate": 1.0,
                "budget_calls_per_hour": n + 40,
                "budget_usd_per_hour": None,
            },
        )
        store_a = Store(url)
        src_a = KafkaTurnSource(settings.kafka)
        with running(settings, src_a, KafkaDeadLetterQueue(settings.kafka), store_a) as a:
            refused_b = 0.0
            for round_ in range(2):
                target = judge.request_count + 20
                wait_for(lambda t=target: judge.request_count >= t, what=f"A under way ({round_})")
                judge.latency = 0.5  # A gets through ~4 turns a second while B joins
                store_b = Store(url)
                src_b = KafkaTurnSource(settings.kafka)
                with running(settings, src_b, KafkaDeadLetterQueue(settings.kafka), store_b) as b:
                    wait_for(
                        lambda: b.sample("casewatch_turns_consumed_total", {"topic": topic}) > 0,
                        what=f"B joined and reads ({round_})",
                    )
                    wait_for(
                        lambda: b.sample("casewatch_turns_sampled_total", SAMPLED) >= 10,
                        what=f"B judges ({round_})",
                    )
                    judge.latency = 0.05  # B leaves under load, its queue full
                refused_b += b.sample("casewatch_turns_skipped_total", skip)
                # B left (its harness checked it left no reservation): A takes its partitions.

            def committed() -> list[int | None]:
                group = settings.kafka.group_id
                return [committed_offset(bootstrap, group, topic, p) for p in range(partitions)]

            wait_for(
                lambda: committed() == [per_partition] * partitions,
                what="every partition committed to the end",
                explain=lambda: {
                    "committed": committed(),
                    "a_consumed": a.sample("casewatch_turns_consumed_total", {"topic": topic}),
                    "a_in_flight": a.sample("casewatch_in_flight"),
                    "a_paused": a.sample("casewatch_paused_partitions"),
                    "judge_requests": judge.request_count,
                },
            )
            wait_for(
                lambda: a.sample("casewatch_judge_budget_reserved", CALLS) == 0,
                what="A's reservations returned",
            )
            refused_a = a.sample("casewatch_turns_skipped_total", skip)
    assert refused_a + refused_b == 0
    assert rows_per_event(Store(url)) == {
        f"p{p}-{i}": 1 for p in range(partitions) for i in range(per_partition)
    }
