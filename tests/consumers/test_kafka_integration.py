"""KafkaTurnSource and KafkaDeadLetterQueue against real brokers: the contract suite's consumer,
offset, pause/resume, revoke and dead-letter tests, written to Kafka's semantics and run on
every broker of ``kafka_broker`` with the embedded broker's workarounds off
(``broker_quirks="none"``: a plain Kafka consumer)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from consumers._kafka import KafkaConsumer, any_reachable
from consumers._kafka_group import group_formed
from consumers.dlq import (
    HEADER_DETAIL,
    HEADER_OFFSET,
    HEADER_PARTITION,
    HEADER_REASON,
    HEADER_TOPIC,
    HEADER_TRUNCATED,
    KafkaDeadLetterQueue,
)
from consumers.kafka_source import KafkaTurnSource
from consumers.records import RawMessage, TopicPartition
from consumers.tansu import FETCH_MAX_WAIT_MS, EmbeddedBroker, create_topics, delete_topics
from monitor.config.kafka import KafkaConfig
from monitor.errors import BrokerError
from tests.fixtures.broker import ContractBroker, produce
from tests.support.kafka import poll_until, read_topic, source_config
from tests.support.waiting import DEADLINE_S, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def source_factory() -> Iterator[Any]:
    opened: list[KafkaTurnSource] = []

    def make(cfg: KafkaConfig, **kw: Any) -> KafkaTurnSource:
        source = KafkaTurnSource(cfg, **kw)
        opened.append(source)
        return source

    yield make
    for source in opened:
        source.close()


def test_consume_commit_and_a_new_member_resumes(
    kafka_broker: ContractBroker, contract_topic: str, source_factory: Any
) -> None:
    produce(kafka_broker.bootstrap, contract_topic, [b"v%d" % i for i in range(10)], key=b"k")
    cfg = source_config(kafka_broker, contract_topic)
    first = source_factory(cfg)
    messages = poll_until(first, 10)
    assert [m.value for m in messages] == [b"v%d" % i for i in range(10)]
    assert messages[0].key == b"k" and messages[0].timestamp_ms is not None
    tp = TopicPartition(contract_topic, 0)
    assert first.assignment() == {tp}
    first.commit({tp: 6})
    first.close()

    second = source_factory(cfg)
    assert [m.offset for m in poll_until(second, 4)] == [6, 7, 8, 9]


def test_pause_stops_delivery_and_resume_restarts_it(
    kafka_broker: ContractBroker, contract_topic: str, source_factory: Any
) -> None:
    produce(kafka_broker.bootstrap, contract_topic, [b"a", b"b"])
    source = source_factory(source_config(kafka_broker, contract_topic))
    assert len(poll_until(source, 2)) == 2
    tp = TopicPartition(contract_topic, 0)
    source.pause([tp])
    assert source.paused() == {tp}
    produce(kafka_broker.bootstrap, contract_topic, [b"c", b"d"])
    for _ in range(5):
        assert source.poll(0.2, 10) == []
    source.resume([tp])
    assert source.paused() == set()
    assert [m.value for m in poll_until(source, 2)] == [b"c", b"d"]


def test_lag_is_reported_from_highwater_marks(
    kafka_broker: ContractBroker, contract_topic: str, source_factory: Any
) -> None:
    produce(kafka_broker.bootstrap, contract_topic, [b"x"] * 20)
    source = source_factory(source_config(kafka_broker, contract_topic), lag_refresh_s=0.0)
    tp = TopicPartition(contract_topic, 0)
    assert len(poll_until(source, 5, max_records=5)) == 5
    assert source.lag() == {tp: 15}
    poll_until(source, 15)
    assert source.lag() == {tp: 0}


def test_headers_are_kept(
    kafka_broker: ContractBroker, contract_topic: str, source_factory: Any
) -> None:
    produce(kafka_broker.bootstrap, contract_topic, [b"x"], headers=[("trace", b"abc")])
    (msg,) = poll_until(source_factory(source_config(kafka_broker, contract_topic)), 1)
    assert msg.headers == (("trace", b"abc"),)


def test_the_fetch_wait_is_the_configured_one(
    kafka_broker: ContractBroker, contract_topic: str, source_factory: Any
) -> None:
    # Kafka's 500 ms by default; the embedded broker's consumers lower it, because Tansu sleeps
    # after every fetch (consumers/tansu.py, FETCH_MAX_WAIT_MS).
    assert KafkaConfig().fetch_max_wait_ms == 500
    source = source_factory(
        source_config(kafka_broker, contract_topic, fetch_max_wait_ms=FETCH_MAX_WAIT_MS)
    )
    produce(kafka_broker.bootstrap, contract_topic, [b"a", b"b"])
    assert [m.value for m in poll_until(source, 2)] == [b"a", b"b"]
    assert source._consumer.config["fetch_max_wait_ms"] == FETCH_MAX_WAIT_MS


def test_a_negative_fetch_wait_is_refused() -> None:
    with pytest.raises(ValueError, match="fetch_max_wait_ms"):
        KafkaConfig(fetch_max_wait_ms=-1)


class Member:
    """A group member polling on its own thread, as each replica does on its own."""

    def __init__(self, source: KafkaTurnSource, busy_s: float = 0.0) -> None:
        self.source = source
        self._busy_s = busy_s
        self.received: list[RawMessage] = []
        self.events: list[tuple[str, set[TopicPartition]]] = []
        self.committed_on_revoke: dict[TopicPartition, int] = {}
        self.revoked_on: list[threading.Thread] = []
        self._positions: dict[TopicPartition, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        source.set_rebalance_listener(self._on_assigned, self._on_revoked)

    def _on_assigned(self, tps: set[TopicPartition]) -> None:
        self.events.append(("assigned", tps))

    def _on_revoked(self, tps: set[TopicPartition]) -> None:
        self.revoked_on.append(threading.current_thread())
        self.events.append(("revoked", tps))
        offsets = {tp: self._positions[tp] for tp in tps if tp in self._positions}
        self.source.commit(offsets)
        self.committed_on_revoke.update(offsets)

    def _run(self) -> None:
        while not self._stop.is_set():
            for m in self.source.poll(0.1, 100):
                self.received.append(m)
                self._positions[m.tp] = m.offset + 1
            # Work between polls (a daemon under backpressure waits here) must not stall a
            # rebalance: kafka-python 3.0.12 drops a join that completes meanwhile.
            self._stop.wait(self._busy_s)

    def __enter__(self) -> Member:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(DEADLINE_S)
        self.source.close()


@pytest.mark.deviates(
    "noida", "refuses a commit made in on_revoked during a rebalance (IllegalGeneration, 22)"
)
def test_a_rebalance_commits_on_revoke_and_the_new_owner_resumes_there(
    kafka_broker: ContractBroker,
) -> None:
    topic = f"test.{uuid.uuid4().hex[:12]}"
    create_topics(kafka_broker.bootstrap, [topic], partitions=2)
    tps = {TopicPartition(topic, 0), TopicPartition(topic, 1)}
    try:
        for p in (0, 1):
            values = [b"p%d-%d" % (p, i) for i in range(5)]
            produce(kafka_broker.bootstrap, topic, values, partition=p)
        cfg = source_config(kafka_broker, topic)
        with Member(KafkaTurnSource(cfg)) as first:
            wait_for(lambda: len(first.received) == 10, "the first member to read everything")
            assert first.events == [("assigned", tps)]
            with Member(KafkaTurnSource(cfg), busy_s=0.5) as second:
                wait_for(
                    lambda: first.source.assignment() and second.source.assignment(),
                    "the partitions to be shared",
                )
                # The first member gave everything up, committing what it had read.
                assert first.events[1] == ("revoked", tps)
                # On the member's polling thread, not on kafka-python's I/O thread.
                assert first.revoked_on[0] is first._thread
                assert first.committed_on_revoke == {tp: 5 for tp in tps}
                produce(kafka_broker.bootstrap, topic, [b"late"], partition=0)
                produce(kafka_broker.bootstrap, topic, [b"late"], partition=1)
                wait_for(
                    lambda: len(first.received) + len(second.received) >= 12, "the late records"
                )
                late = first.received[10:] + second.received
                # Nothing committed on revoke is delivered again: both resume at offset 5.
                assert sorted((m.partition, m.offset, m.value) for m in late) == [
                    (0, 5, b"late"),
                    (1, 5, b"late"),
                ]
    finally:
        delete_topics(kafka_broker.bootstrap, [topic])


class PolledConsumer:
    """A plain kafka-python member of ``group``, polled on a thread of its own until
    ``stop_polling``; after that it stays in the group (its heartbeat thread keeps the session)
    without rejoining, as a member stuck in its processing does, until its poll interval
    passes or it is closed."""

    def __init__(self, bootstrap: str, topic: str, group: str, max_poll_interval_ms: int) -> None:
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=1000,
            max_poll_interval_ms=max_poll_interval_ms,
        )
        self.consumer.subscribe([topic])
        self._polling = threading.Event()
        self._polling.set()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while self._polling.is_set():
            self.consumer.poll(timeout_ms=100)

    def stop_polling(self) -> None:
        self._polling.clear()
        self._thread.join(DEADLINE_S)

    def close(self) -> None:
        self.stop_polling()
        self.consumer.close(autocommit=False, timeout_ms=5000)


def test_a_poll_given_a_join_limit_returns_while_a_member_holds_up_the_rebalance(
    kafka_broker: ContractBroker, contract_topic: str, source_factory: Any
) -> None:
    # A member that stopped polling holds a rebalance open until its max.poll.interval passes,
    # and a poll waits for the join up to the JoinGroup timeout (max.poll.interval + 5 s): both
    # longer here than the suite's hang guard. A draining daemon's poll gives a limit (what the
    # drain has left): it returns with the rebalance still under way, where one without it
    # waited out the join and carried the stop past its budget.
    long_ms = int((DEADLINE_S + 60) * 1000)
    group = f"g-{uuid.uuid4().hex[:8]}"
    holder = PolledConsumer(kafka_broker.bootstrap, contract_topic, group, long_ms)
    newcomer: PolledConsumer | None = None
    try:
        wait_for(lambda: bool(holder.consumer.assignment()), "the first member's assignment")
        cfg = source_config(kafka_broker, contract_topic, group)
        source = source_factory(cfg.model_copy(update={"max_poll_interval_ms": long_ms}))
        # Joined with whole rounds (no limit): the other member is polling, so it forms.
        wait_for(
            lambda: group_formed(source._consumer) is True,
            "the source to join the group",
            tick=lambda: source.poll(0.1, 10),
        )
        holder.stop_polling()  # still a member: it will not rejoin
        newcomer = PolledConsumer(kafka_broker.bootstrap, contract_topic, group, 6000)
        # Limited from here on: this rebalance cannot end while the holder stays away.
        wait_for(
            lambda: source._consumer._coordinator.need_rejoin(),
            "the rebalance the newcomer starts",
            tick=lambda: source.poll(0.1, 10, join_limit_s=1.0),
        )
        returned = threading.Event()

        def bounded_poll() -> None:
            source.poll(0.02, 10, join_limit_s=1.0)
            returned.set()

        threading.Thread(target=bounded_poll, daemon=True).start()
        wait_for(returned.is_set, "the poll given a join limit to return")
        assert group_formed(source._consumer) is not True  # the rebalance is still under way
    finally:
        for member in (newcomer, holder):
            if member is not None:
                member.close()


def test_close_runs_on_revoked_and_its_commit_lands(
    kafka_broker: ContractBroker, contract_topic: str, source_factory: Any
) -> None:
    produce(kafka_broker.bootstrap, contract_topic, [b"x"] * 3)
    cfg = source_config(kafka_broker, contract_topic)
    source = source_factory(cfg)
    tp = TopicPartition(contract_topic, 0)
    threads: list[int] = []

    def on_revoked(tps: set[TopicPartition]) -> None:
        threads.append(threading.get_ident())
        source.commit({tp: 3})

    source.set_rebalance_listener(lambda tps: None, on_revoked)
    poll_until(source, 3)
    source.close()
    # On the thread that closed, not on kafka-python's I/O thread.
    assert threads == [threading.get_ident()]
    produce(kafka_broker.bootstrap, contract_topic, [b"after"])
    assert [m.value for m in poll_until(source_factory(cfg), 1)] == [b"after"]


def test_ping(kafka_broker: ContractBroker, contract_topic: str, source_factory: Any) -> None:
    source = source_factory(source_config(kafka_broker, contract_topic))
    assert source.ping()
    # Any reachable bootstrap server will do; dead ones are skipped.
    assert any_reachable(["127.0.0.1:1", kafka_broker.bootstrap], 0.5)
    assert not any_reachable(["127.0.0.1:1"], 0.5)


def test_unreachable_broker_is_a_broker_error() -> None:
    cfg = KafkaConfig(bootstrap_servers=["127.0.0.1:1"])
    with pytest.raises(BrokerError, match=r"cannot connect to any Kafka bootstrap server \(127"):
        KafkaTurnSource(cfg, connect_timeout_s=0.3)


def test_dead_letter_record_carries_reason_origin_and_original_bytes(
    kafka_broker: ContractBroker, contract_topic: str
) -> None:
    dlq = KafkaDeadLetterQueue(source_config(kafka_broker, contract_topic, max_message_bytes=1000))
    try:
        original = RawMessage(
            contract_topic, 0, 41, b"\xffnot utf8", key=b"conv-1", headers=(("trace", b"t1"),)
        )
        dlq.send(original, "bad_utf8", "invalid UTF-8 at byte 0")
        big = RawMessage(contract_topic, 0, 42, b"y" * 5000)
        dlq.send(big, "too_large", "5000 bytes > limit 1000")
        dlq.flush(5.0)
    finally:
        dlq.close()
    first, second = read_topic(kafka_broker.bootstrap, f"{contract_topic}.dlq", 2)
    assert (first.value, first.key) == (b"\xffnot utf8", b"conv-1")
    assert dict(first.headers) == {
        "trace": b"t1",
        HEADER_REASON: b"bad_utf8",
        HEADER_DETAIL: b"invalid UTF-8 at byte 0",
        HEADER_TOPIC: contract_topic.encode(),
        HEADER_PARTITION: b"0",
        HEADER_OFFSET: b"41",
    }
    assert second.value == b"y" * 1000
    headers = dict(second.headers)
    assert headers[HEADER_TRUNCATED] == b"true"
    assert headers[HEADER_OFFSET] == b"42"


def test_unreachable_broker_fails_the_dead_letter_queue_fast() -> None:
    cfg = KafkaConfig(bootstrap_servers=["127.0.0.1:1"])
    with pytest.raises(BrokerError, match="cannot connect to any Kafka bootstrap server"):
        KafkaDeadLetterQueue(cfg, connect_timeout_s=0.3)


def test_with_the_broker_gone_commit_send_and_close_give_up_in_time(
    own_broker: EmbeddedBroker,
) -> None:
    """A stop while the cluster is unreachable: every call returns within its limit, including
    close() with a revocation commit to make and a dead-letter record still pending."""
    topic, limit_s = "outage.turns", 1.0
    create_topics(own_broker.bootstrap, [topic], dlq_suffix=".dlq")
    produce(own_broker.bootstrap, topic, [b"x"] * 3)
    cfg = source_config(own_broker, topic)
    source = KafkaTurnSource(cfg, commit_timeout_s=limit_s, close_timeout_s=limit_s)
    dlq = KafkaDeadLetterQueue(cfg, send_timeout_s=limit_s, close_timeout_s=limit_s)
    tp = TopicPartition(topic, 0)
    source.set_rebalance_listener(lambda tps: None, lambda tps: source.commit({tp: 3}))
    assert len(poll_until(source, 3)) == 3
    dlq.send(RawMessage(topic, 0, 0, b"poison"), "not_json", "before the outage")
    own_broker.stop()
    with pytest.raises(BrokerError, match="committing offsets: "):
        source.commit({tp: 2})
    # The send hands the record over; the flush finds it was not written.
    dlq.send(RawMessage(topic, 0, 1, b"poison"), "not_json", "during the outage")
    with pytest.raises(BrokerError, match="dead-letter topic"):
        dlq.flush(limit_s)
    closer = threading.Thread(target=lambda: (source.close(), dlq.close()))
    closer.start()
    closer.join(3 * limit_s + 10.0)  # the close limits, + slack: a liveness bound
    assert not closer.is_alive(), "closing hung with the broker gone"


class PartlyFinished(Member):
    """A member that finishes only the records of each partition below ``finished``: on a
    revocation it commits there and drops the rest, as the daemon drops its queued turns."""

    def __init__(self, source: KafkaTurnSource, finished: int) -> None:
        super().__init__(source)
        self._finished = finished

    def _on_revoked(self, tps: set[TopicPartition]) -> None:
        self.revoked_on.append(threading.current_thread())
        self.events.append(("revoked", tps))
        offsets = {tp: min(self._positions[tp], self._finished) for tp in tps}
        self.source.commit(offsets)
        self.committed_on_revoke.update(offsets)


@pytest.mark.deviates(
    "noida",
    "answers a member's SyncGroup with assignment bytes kafka-python 3.0.12 cannot decode "
    "(struct.error) when a member of another topic joins the group, and refuses a commit made "
    "in on_revoked during a rebalance (IllegalGeneration, 22)",
)
def test_a_partition_given_back_is_read_again_from_the_commit(
    kafka_broker: ContractBroker, contract_topic: str
) -> None:
    """A rebalance that gives a partition back to the member that held it: Kafka's consumers
    keep its fetch position, past what the member dropped at the revocation; the source seeks
    it back to the commit, so the dropped records are delivered again and none is lost."""
    produce(kafka_broker.bootstrap, contract_topic, [b"v%d" % i for i in range(10)])
    other = f"test.{uuid.uuid4().hex[:12]}"
    create_topics(kafka_broker.bootstrap, [other])
    cfg = source_config(kafka_broker, contract_topic)
    tp = TopicPartition(contract_topic, 0)
    try:
        with PartlyFinished(KafkaTurnSource(cfg), finished=4) as first:
            wait_for(lambda: len(first.received) == 10, "the member to read everything")
            # A member of the same group reading another topic: the group rebalances, and
            # the partition goes back to the only member that reads its topic.
            with Member(KafkaTurnSource(cfg.model_copy(update={"topics": [other]}))):

                def offsets() -> list[int]:
                    return [m.offset for m in first.received]

                # However many rounds the join takes, each gives the partition back.
                wait_for(
                    lambda: (
                        ("revoked", {tp}) in first.events
                        and first.events[-1] == ("assigned", {tp})
                        and all(offsets().count(o) >= 2 for o in range(4, 10))
                    ),
                    "the dropped records delivered again",
                    explain=lambda: (first.events, offsets()),
                )
        assert set(first.committed_on_revoke.values()) == {4}
        # What was finished is never delivered again (what was dropped was, above).
        assert [offsets().count(o) for o in range(4)] == [1, 1, 1, 1]
    finally:
        delete_topics(kafka_broker.bootstrap, [other])
