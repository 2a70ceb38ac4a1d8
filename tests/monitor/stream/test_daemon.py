"""The daemon in a thread against real components: Tansu, SQLite/PostgreSQL, real judges.

Subprocess runs (SIGTERM, SIGKILL + restart) are in tests/monitor/commands/test_daemon_cli.py.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from consumers.dlq import HEADER_REASON, FileDeadLetterSink, KafkaDeadLetterQueue
from consumers.file_source import FileTurnSource
from consumers.kafka_source import KafkaTurnSource
from consumers.records import TopicPartition
from consumers.source import TurnSource
from consumers.tansu import EmbeddedBroker, create_topics
from monitor.config.judges import JudgeConfig
from monitor.config.settings import Settings, load_settings
from monitor.judging.evaluator import build_evaluator
from monitor.metrics.exporter import Metrics
from monitor.sampling.sampler import sample_point
from monitor.storage.audit import counts, stored_verdicts
from monitor.storage.store import Store
from monitor.stream.daemon import Daemon
from tests.fake_judge_server import FakeJudgeServer
from tests.fixtures.broker import DLQ_SUFFIX, ContractBroker, produce
from tests.fixtures.databases import make_turn
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
from tests.support.http import http_get
from tests.support.kafka import committed_offset, read_topic
from tests.support.memory_source import MemorySource
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

MALFORMED: list[tuple[bytes, str]] = [
    (b"{not json", "not_json"),
    (b'{"event_id": "x"}', "schema"),
    (b"\xff\xfe\xfa", "bad_utf8"),
    (b"[1, 2]", "not_object"),
]


# ---------------------------------------------------------------- helpers


def interleave(good: list[bytes], bad: list[bytes]) -> list[bytes]:
    """Spread the malformed records through the stream (so commits must step over them)."""
    out = list(good)
    step = max(1, len(good) // (len(bad) + 1))
    for i, value in enumerate(bad):
        out.insert((i + 1) * step + i, value)
    return out


def expected_sampled(n: int, rate: float, prefix: str = "evt") -> set[str]:
    return {f"{prefix}-{i}" for i in range(n) if sample_point(f"conv-{prefix}-{i}") < rate}


# ---------------------------------------------------------------- Kafka end to end


def test_kafka_end_to_end_sampled_turns_stored_once_poison_dead_lettered(
    tansu_broker: EmbeddedBroker, kafka_topic: str, db_url: str
) -> None:
    bootstrap = tansu_broker.bootstrap
    n, rate = 60, 0.5
    values = interleave(turn_values(n), [v for v, _ in MALFORMED])
    # The same event published twice (a producer retry): judged twice, stored once.
    values.append(values[0])
    produce(bootstrap, kafka_topic, values)
    settings = kafka_settings(bootstrap, kafka_topic, db_url, sampling={"default_rate": rate})
    store = Store(db_url)
    store.migrate()
    expected = expected_sampled(n, rate)
    assert 0 < len(expected) < n
    source = KafkaTurnSource(settings.kafka)
    dlq = KafkaDeadLetterQueue(settings.kafka)
    group = settings.kafka.group_id
    with running(settings, source, dlq, store) as h:
        wait_for(
            lambda: committed_offset(bootstrap, group, kafka_topic) == len(values),
            what="offsets committed to the end",
        )
        assert rows_per_event(store) == dict.fromkeys(expected, 1)

        status, body = http_get(h.server.port, "/healthz")
        assert status == 200 and json.loads(body)["alive"] is True
        wait_for(lambda: http_get(h.server.port, "/readyz")[0] == 200, what="ready")
        status, text = http_get(h.server.port, "/metrics")
        assert status == 200
        assert f'casewatch_turns_consumed_total{{topic="{kafka_topic}"}} {len(values)}.0' in text

        consumed = h.sample("casewatch_turns_consumed_total", {"topic": kafka_topic})
        assert consumed == len(values)
        judged = sum(
            h.sample("casewatch_turns_judged_total", {"assistant": "helpdesk", "band": b})
            for b in ("severe", "moderate", "minor", "none", "judge_failed")
        )
        first_sampled = "evt-0" in expected
        # The second copy is skipped if the first one's verdict was stored before its look-up,
        # judged (and deduplicated by the store) otherwise: either way, once.
        replayed = h.sample(
            "casewatch_turns_skipped_total", {"assistant": "helpdesk", "reason": "already_judged"}
        )
        assert replayed <= first_sampled
        assert judged == len(expected) + first_sampled - replayed
        assert h.sample("casewatch_stored_total", {"outcome": "inserted"}) == len(expected)
        duplicate = h.sample("casewatch_stored_total", {"outcome": "duplicate"})
        assert duplicate == first_sampled - replayed
        skipped = h.sample(
            "casewatch_turns_skipped_total", {"assistant": "helpdesk", "reason": "not_sampled"}
        )
        assert skipped == n - len(expected) + (not first_sampled)
        for _, reason in MALFORMED:
            assert h.sample("casewatch_dead_letter_total", {"reason": reason}) == 1
        assert h.sample("casewatch_offsets_committed_total", {"topic": kafka_topic}) >= 1
        assert h.sample("casewatch_in_flight") == 0
        assert h.sample("casewatch_paused_partitions") == 0
        lag = {"topic": kafka_topic, "partition": "0"}
        wait_for(lambda: h.registry.get_sample_value("casewatch_consumer_lag", lag) == 0)

    dead = read_topic(bootstrap, f"{kafka_topic}{DLQ_SUFFIX}", len(MALFORMED))
    assert [r.value for r in dead] == [v for v, _ in MALFORMED]
    reasons = [dict(r.headers)[HEADER_REASON].decode() for r in dead]
    assert reasons == [reason for _, reason in MALFORMED]


def test_a_new_consumer_in_the_group_resumes_after_the_commit(
    tansu_broker: EmbeddedBroker, kafka_topic: str, tmp_path: Path
) -> None:
    bootstrap = tansu_broker.bootstrap
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    settings = kafka_settings(bootstrap, kafka_topic, url)
    store = Store(url)
    store.migrate()
    produce(bootstrap, kafka_topic, turn_values(10, "a"))
    with running(
        settings, KafkaTurnSource(settings.kafka), KafkaDeadLetterQueue(settings.kafka), store
    ):
        wait_for(lambda: counts(store)["verdicts"] == 10, what="first batch stored")
    produce(bootstrap, kafka_topic, turn_values(5, "b"))
    store = Store(url)
    with running(
        settings, KafkaTurnSource(settings.kafka), KafkaDeadLetterQueue(settings.kafka), store
    ) as h:
        wait_for(lambda: counts(store)["verdicts"] == 15, what="second batch stored")
        wait_for(
            lambda: committed_offset(bootstrap, settings.kafka.group_id, kafka_topic) == 15,
            what="commit",
        )
        # Only the new records were read again: nothing judged twice.
        assert h.sample("casewatch_turns_consumed_total", {"topic": kafka_topic}) == 5
        assert h.sample("casewatch_stored_total", {"outcome": "duplicate"}) == 0


def test_a_replay_from_offset_zero_makes_no_judge_call(
    tansu_broker: EmbeddedBroker, kafka_topic: str, tmp_path: Path
) -> None:
    # A second consumer group reads the whole topic again (as a crash replays its tail): every
    # turn already has a verdict under this judge configuration, so it costs a database read.
    bootstrap = tansu_broker.bootstrap
    n = 30
    produce(bootstrap, kafka_topic, turn_values(n, "r"))
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    Store(url).migrate()
    with FakeJudgeServer() as judge:
        judges = {"remote": fake_judge_config(judge)}
        calls = []
        for _ in range(2):
            settings = kafka_settings(bootstrap, kafka_topic, url, judges=judges, judge="remote")
            store = Store(url)
            kafka = settings.kafka
            with running(settings, KafkaTurnSource(kafka), KafkaDeadLetterQueue(kafka), store) as h:
                wait_for(
                    lambda g=kafka.group_id: committed_offset(bootstrap, g, kafka_topic) == n,
                    what="offsets committed to the end",
                )
                skipped = h.sample(
                    "casewatch_turns_skipped_total",
                    {"assistant": "helpdesk", "reason": "already_judged"},
                )
            calls.append(judge.request_count)
            judge.reset()
    assert calls == [n, 0]
    assert skipped == n
    assert rows_per_event(Store(url)) == {f"r-{i}": 1 for i in range(n)}


@pytest.mark.deviates(
    "noida", "refuses a commit made in on_revoked during a rebalance (IllegalGeneration, 22)"
)
def test_a_rebalance_mid_stream_loses_and_duplicates_nothing(
    kafka_broker: ContractBroker, tmp_path: Path
) -> None:
    """Contract suite: every broker of ``kafka_broker``, broker quirks off."""
    bootstrap = kafka_broker.bootstrap
    topic = f"test.rebalance.{uuid.uuid4().hex[:8]}"
    create_topics(bootstrap, [topic], partitions=2, dlq_suffix=DLQ_SUFFIX)
    n = 200  # per partition
    produce(bootstrap, topic, turn_values(n, "p0"), partition=0)
    produce(bootstrap, topic, turn_values(n, "p1"), partition=1)
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    Store(url).migrate()
    with FakeJudgeServer(latency=0.05) as judge:
        judges = {"remote": fake_judge_config(judge)}
        settings = kafka_settings(
            bootstrap, topic, url, judges=judges, judge="remote", daemon={"concurrency": 2}
        )
        group = settings.kafka.group_id
        store_a, store_b = Store(url), Store(url)
        src_a = KafkaTurnSource(settings.kafka)
        with running(settings, src_a, KafkaDeadLetterQueue(settings.kafka), store_a) as a:
            wait_for(lambda: counts(store_a)["verdicts"] >= 20, what="A under way")
            src_b = KafkaTurnSource(settings.kafka)
            with running(settings, src_b, KafkaDeadLetterQueue(settings.kafka), store_b) as b:
                wait_for(
                    lambda: all(committed_offset(bootstrap, group, topic, p) == n for p in (0, 1)),
                    what="both partitions committed to the end",
                )
                consumed_a = a.sample("casewatch_turns_consumed_total", {"topic": topic})
                consumed_b = b.sample("casewatch_turns_consumed_total", {"topic": topic})
        judge_calls = judge.request_count
        abandoned = a.sample("casewatch_revoke_abandoned_total") + b.sample(
            "casewatch_revoke_abandoned_total"
        )
    assert consumed_b > 0, "B never got a partition: no rebalance happened"
    assert consumed_a + consumed_b >= 2 * n  # overlap = records re-read after the revoke
    expected = {f"p{p}-{i}": 1 for p in (0, 1) for i in range(n)}
    assert rows_per_event(Store(url)) == expected
    # Turns being judged at the revoke were finished and committed before the partition moved:
    # none was judged (and paid for) twice, unless the revoke wait ran out on it (and even then
    # not if its verdict was stored before the new owner looked it up), or a partition went
    # back to the member that held it: read again from its commit at once, a turn finished
    # above the commit can be looked up before its verdict is stored, and judged again (stored
    # once, as above). Never more calls than turns read.
    reread = consumed_a + consumed_b - 2 * n
    assert 2 * n <= judge_calls <= 2 * n + abandoned + reread


def test_a_source_that_rewinds_is_read_again_without_loss(tmp_path: Path) -> None:
    tp = TopicPartition("turns", 0)
    source = MemorySource({tp: turn_values(30)})
    settings, store = _file_settings(tmp_path, daemon={"commit_interval_seconds": 0.01})
    store.migrate()
    with running(settings, source, FileDeadLetterSink(tmp_path / "dlq.jsonl"), store) as h:
        wait_for(lambda: source.committed.get(tp) == 30, what="first pass committed")
        # As a consumer that lost its group membership does: back to the broker's last
        # commit (here, pretend it was 12).
        source.committed[tp] = 12
        source.rewind(tp)
        wait_for(lambda: source.position[tp] == 30, what="second pass read")
        wait_for(lambda: source.committed.get(tp) == 30, what="second pass committed")
        assert h.sample("casewatch_turns_consumed_total", {"topic": "turns"}) == 48
        # The re-read turns already had verdicts: finished without a judge call (or, when the
        # look-up came before the first pass stored them, deduplicated by the store).
        replayed = h.sample(
            "casewatch_turns_skipped_total", {"assistant": "helpdesk", "reason": "already_judged"}
        )
        assert replayed + h.sample("casewatch_stored_total", {"outcome": "duplicate"}) == 18
    assert rows_per_event(store) == {f"evt-{i}": 1 for i in range(30)}


def test_partitions_moved_elsewhere_are_forgotten(tmp_path: Path) -> None:
    tp0, tp1 = TopicPartition("turns", 0), TopicPartition("turns", 1)
    source = MemorySource({tp0: turn_values(5, "a"), tp1: turn_values(5, "b")})
    settings, store = _file_settings(tmp_path)
    store.migrate()
    with running(settings, source, FileDeadLetterSink(tmp_path / "dlq.jsonl"), store) as h:
        wait_for(lambda: source.committed == {tp0: 5, tp1: 5}, what="both committed")
        source.owned = {tp0}
        wait_for(lambda: h.daemon.tracker.partitions() == {tp0}, what="tp1 forgotten")


def _revoke_harness(
    tmp_path: Path, n: int, revoke_timeout: float
) -> tuple[Settings, Store, MemorySource, GatedEvaluator, TopicPartition]:
    tp = TopicPartition("turns", 0)
    source = MemorySource({tp: turn_values(n)})
    settings, store = _file_settings(
        tmp_path,
        daemon={"commit_interval_seconds": 3600, "revoke_timeout_seconds": revoke_timeout},
        # The revoke wait is capped at a quarter of this: keep the cap out of the way.
        kafka={"max_poll_interval_ms": 600_000},
    )
    store.migrate()
    return settings, store, source, GatedEvaluator(open_gate=False), tp


@contextmanager
def _daemon_running(
    settings: Settings, source: TurnSource, store: Store, evaluator: GatedEvaluator, tmp: Path
) -> Iterator[tuple[Daemon, CollectorRegistry]]:
    """The daemon on a thread; on the way out the judge's gate opens, and the daemon stops and
    closes with what it ran over."""
    registry = CollectorRegistry()
    dlq = FileDeadLetterSink(tmp / "dlq.jsonl")
    daemon = build_daemon(settings, source, dlq, store, evaluator, Metrics(registry))
    thread = threading.Thread(target=daemon.run, name="daemon", daemon=True)
    thread.start()
    try:
        yield daemon, registry
    finally:
        evaluator.gate.set()
        daemon.stop()
        thread.join(timeout=60)
        daemon.close()
        close_opened(source, dlq, store)


def test_a_revoke_waits_for_turns_being_judged_then_commits_them(tmp_path: Path) -> None:
    settings, store, source, evaluator, tp = _revoke_harness(tmp_path, 5, revoke_timeout=60)
    with _daemon_running(settings, source, store, evaluator, tmp_path) as (_daemon, registry):
        wait_for(lambda: evaluator.calls == 5, what="five turns being judged")
        source.revoke_next_poll.set()
        # The loop is now inside the revoke, waiting on the judge: let the judge answer.
        wait_for(lambda: not source.revoke_next_poll.is_set(), what="revoke started")
        evaluator.gate.set()
        wait_for(source.revoked.is_set, what="revoke finished")
        # Committed inside the revoke: the next owner starts after these five turns.
        assert source.committed.get(tp) == 5
        assert registry.get_sample_value("casewatch_revoke_abandoned_total") == 0
        assert evaluator.calls == 5
    assert rows_per_event(store) == {f"evt-{i}": 1 for i in range(5)}


def test_a_revoke_abandons_and_counts_turns_still_judged_when_its_wait_runs_out(
    tmp_path: Path,
) -> None:
    settings, store, source, evaluator, tp = _revoke_harness(tmp_path, 3, revoke_timeout=0.2)
    with _daemon_running(settings, source, store, evaluator, tmp_path) as (_daemon, registry):
        wait_for(lambda: evaluator.calls == 3, what="three turns being judged")
        source.revoke_next_poll.set()
        wait_for(source.revoked.is_set, what="revoke finished")
        # Nothing finished: nothing committed, and the three turns are counted as abandoned
        # (their next owner judges them again).
        assert source.committed.get(tp) is None
        assert registry.get_sample_value("casewatch_revoke_abandoned_total") == 3


def test_turns_held_at_a_revoke_wait_for_the_new_assignment_and_go_if_it_moved(
    tmp_path: Path,
) -> None:
    """A poll can return between a revoke and the group's new assignment, while the consumer
    still lists the revoked partitions: the turns held back at the revoke must not start
    then. The partition then goes to another consumer, which reads them from the commit."""
    concurrency = 2
    settings, store, source, evaluator, tp = _revoke_harness(tmp_path, 6, revoke_timeout=60)
    settings = settings.model_copy(
        update={"daemon": settings.daemon.model_copy(update={"concurrency": concurrency})}
    )
    with _daemon_running(settings, source, store, evaluator, tmp_path) as (daemon, registry):
        wait_for(lambda: evaluator.calls == concurrency, what="two turns being judged")
        source.rebalance_completes.clear()
        source.next_owned = set()
        source.revoke_next_poll.set()
        wait_for(source.revoking.is_set, what="revoke started")
        evaluator.gate.set()  # the two calls under way finish and are committed in the revoke
        wait_for(source.revoked.is_set, what="revoke finished")
        assert source.committed.get(tp) == concurrency
        polls = source.polls
        wait_for(lambda: source.polls >= polls + 5, what="polls before the new assignment")
        assert evaluator.calls == concurrency  # the four held turns did not start
        source.rebalance_completes.set()  # the partition went elsewhere
        wait_for(lambda: daemon.tracker.partitions() == set(), what="the partition forgotten")
        polls = source.polls
        wait_for(lambda: source.polls >= polls + 5, what="polls after the new assignment")
        assert evaluator.calls == concurrency
        assert source.committed.get(tp) == concurrency
        assert registry.get_sample_value("casewatch_revoke_abandoned_total") == 0
    assert rows_per_event(store) == {f"evt-{i}": 1 for i in range(concurrency)}


# ---------------------------------------------------------------- file source, failures


def _file_settings(tmp_path: Path, **overrides: Any) -> tuple[Settings, Store]:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    settings = load_settings(None, storage={"url": url}, **overrides)
    return settings, Store(url)


def test_file_source_runs_to_the_end_and_exits_when_idle(tmp_path: Path) -> None:
    data = tmp_path / "turns.jsonl"
    values = interleave(turn_values(20), [b"{oops", b"[]"])
    data.write_bytes(b"\n".join(values) + b"\n")
    settings, store = _file_settings(tmp_path)
    store.migrate()
    source = FileTurnSource(data, offsets_path=tmp_path / "offsets.json")
    dlq = FileDeadLetterSink(tmp_path / "dlq.jsonl")
    metrics = Metrics(CollectorRegistry())
    evaluator = build_evaluator(settings, concurrency=settings.daemon.concurrency)
    daemon = build_daemon(settings, source, dlq, store, evaluator, metrics, exit_when_idle=True)
    thread = threading.Thread(target=daemon.run, daemon=True)
    thread.start()
    assert daemon.wait_finished(timeout=60), "the daemon did not stop at the end of the file"
    thread.join(timeout=5)
    daemon.close()
    close_opened(source, dlq, store, evaluator)
    assert rows_per_event(store) == {f"evt-{i}": 1 for i in range(20)}
    dead = [json.loads(line) for line in (tmp_path / "dlq.jsonl").read_text().splitlines()]
    assert [d["reason"] for d in dead] == ["not_json", "not_object"]
    assert json.loads((tmp_path / "offsets.json").read_text())["offset"] == len(values)


def test_database_outage_pauses_intake_reports_unready_and_recovers(tmp_path: Path) -> None:
    data = tmp_path / "turns.jsonl"
    n = 150  # more than the judge step and the store batch hold together
    data.write_bytes(b"\n".join(turn_values(n)) + b"\n")
    # Not migrated yet: every write fails the way a database that is down does.
    settings, store = _file_settings(
        tmp_path, daemon={"concurrency": 2, "max_in_flight": 4}, kafka={"max_poll_records": 20}
    )
    source = FileTurnSource(data, offsets_path=tmp_path / "offsets.json")
    dlq = FileDeadLetterSink(tmp_path / "dlq.jsonl")
    with running(settings, source, dlq, store) as h:
        wait_for(lambda: h.sample("casewatch_paused_partitions") == 1, what="partition paused")
        wait_for(lambda: http_get(h.server.port, "/readyz")[0] == 503, what="not ready")
        doc = json.loads(http_get(h.server.port, "/readyz")[1])
        assert doc["checks"]["database"] is False and doc["checks"]["broker"] is True
        assert h.sample("casewatch_storage_errors_total") >= 1
        # Memory stays bounded: the judge step's budget, the store batch, two polls' worth.
        assert h.daemon.tracker.pending_count() <= 4 + 64 + 2 * 20
        assert http_get(h.server.port, "/healthz")[0] == 200  # alive: no restart needed
        store.migrate()
        wait_for(lambda: counts(store)["verdicts"] == n, what="all stored after recovery")
        wait_for(lambda: http_get(h.server.port, "/readyz")[0] == 200, what="ready again")
        wait_for(lambda: h.sample("casewatch_paused_partitions") == 0, what="resumed")
    assert rows_per_event(store) == {f"evt-{i}": 1 for i in range(n)}


def test_judge_endpoint_down_records_judge_failed_and_keeps_consuming(tmp_path: Path) -> None:
    from consumers.tansu import free_port

    closed = free_port()  # nothing listens here
    judge = JudgeConfig(
        kind="openai",
        base_url=f"http://127.0.0.1:{closed}/v1",
        model="down",
        api_key="k",
        timeout_seconds=1,
        transport_retries=0,
    )
    data = tmp_path / "turns.jsonl"
    data.write_bytes(b"\n".join(turn_values(10)) + b"\n")
    settings, store = _file_settings(tmp_path, judges={"remote": judge}, judge="remote")
    store.migrate()
    source = FileTurnSource(data, offsets_path=tmp_path / "offsets.json")
    with running(settings, source, FileDeadLetterSink(tmp_path / "dlq.jsonl"), store) as h:
        labels = {"assistant": "helpdesk", "band": "judge_failed"}
        # Stored by the judge threads (write-through), counted when the loop collects them.
        wait_for(lambda: h.sample("casewatch_turns_judged_total", labels) == 10, what="counted")
        assert counts(store)["verdicts"] == 10
        failed = {"judge": "remote", "reason": "connection"}
        assert h.sample("casewatch_judge_failed_total", failed) == 10
    rows = stored_verdicts(store, limit=100)
    assert {(r["status"], r["failure_reason"]) for r in rows} == {("judge_failed", "connection")}


def test_the_identifier_tripwire_checks_every_turn_and_judges_the_hits(tmp_path: Path) -> None:
    """Sampling rate 0: only the turns whose answer corrupts an evidence identifier are judged."""
    context = [{"id": "kb-7", "text": "Open outbound port 9443 to cache.foundry.example."}]
    values = []
    for i in range(12):
        port = "9434" if i % 4 == 0 else "9443"  # evt-0, evt-4, evt-8 swap two digits
        turn = make_turn(f"evt-{i}", contexts=context, answer=f"Open outbound port {port}.")
        values.append(turn.model_dump_json().encode())
    data = tmp_path / "turns.jsonl"
    data.write_bytes(b"\n".join(values) + b"\n")
    settings, store = _file_settings(tmp_path, sampling={"default_rate": 0.0})
    store.migrate()
    source = FileTurnSource(data, offsets_path=tmp_path / "offsets.json")
    registry = CollectorRegistry()
    dlq = FileDeadLetterSink(tmp_path / "dlq.jsonl")
    evaluator = build_evaluator(settings, concurrency=settings.daemon.concurrency)
    daemon = build_daemon(
        settings, source, dlq, store, evaluator, Metrics(registry), exit_when_idle=True
    )
    thread = threading.Thread(target=daemon.run, daemon=True)
    thread.start()
    assert daemon.wait_finished(timeout=60), "the daemon did not stop at the end of the file"
    thread.join(timeout=5)
    daemon.close()
    close_opened(source, dlq, store, evaluator)
    assert rows_per_event(store) == {"evt-0": 1, "evt-4": 1, "evt-8": 1}
    get = registry.get_sample_value
    assert get("casewatch_tripwire_checked_total", {"assistant": "helpdesk"}) == 12
    assert (
        get("casewatch_identifier_mismatch_total", {"assistant": "helpdesk", "kind": "port"}) == 3
    )
    labels = {"assistant": "helpdesk", "reason": "rule:identifier_tripwire"}
    assert get("casewatch_turns_sampled_total", labels) == 3
    # The judge agrees: each tripped turn is identifier_integrity severe.
    assert {
        v["metric_bands"]["identifier_integrity"] for v in stored_verdicts(store, limit=10)
    } == {"severe"}
