"""The kafka-python workarounds and optimisations in consumers/_kafka*.py reach into private
attributes. These tests fail as soon as an upgrade renames one (the exact pin in pyproject keeps
that from happening silently), check that every private name the code uses is in the list, that
nothing is patched at import, and show that a missing attribute degrades to the library's own
behaviour with a warning instead of an error."""

from __future__ import annotations

import ast
import asyncio
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from consumers import _kafka, _kafka_fetch, _kafka_group
from consumers._kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from consumers.records import TopicPartition
from consumers.tansu import EmbeddedBroker, create_topics, delete_topics
from tests.fixtures.broker import produce
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


def _resolve(obj: Any, path: list[str]) -> Any:
    for name in path:
        assert hasattr(obj, name), f"kafka-python no longer has {name!r}"
        obj = getattr(obj, name)
    return obj


def _record_objects() -> dict[str, Any]:
    """A record batch and the fetcher's per-partition reader, as the library builds them: the
    owners of the instance attributes in the list."""
    kafka = _kafka.kafka
    builder = kafka.record.memory_records.MemoryRecordsBuilder(2, 0, 1 << 16, offset=0)
    builder.append(1_700_000_000_000, b"k", b"v", [])
    builder.close()
    data = bytes(builder.buffer())
    records = kafka.record.memory_records.MemoryRecords(data)
    reader = kafka.consumer.fetcher.Fetcher.PartitionRecords(
        0, kafka.TopicPartition("t", 0), kafka.record.memory_records.MemoryRecords(data)
    )
    return {"DefaultRecordBatch": records.next_batch(), "PartitionRecords": reader}


@pytest.mark.integration
def test_the_private_attributes_the_workarounds_use_still_exist(
    tansu_broker: EmbeddedBroker,
) -> None:
    consumer = KafkaConsumer(bootstrap_servers=tansu_broker.bootstrap, group_id="workarounds")
    producer = KafkaProducer(bootstrap_servers=tansu_broker.bootstrap)
    admin = KafkaAdminClient(bootstrap_servers=tansu_broker.bootstrap)
    try:
        owners = {
            "KafkaConsumer": consumer,
            "KafkaProducer": producer,
            "KafkaAdminClient": admin,
            "kafka": _kafka.kafka,
            **_record_objects(),
        }
        assert len(set(_kafka.PRIVATE_ATTRIBUTES)) == len(_kafka.PRIVATE_ATTRIBUTES) == 42
        for dotted in _kafka.PRIVATE_ATTRIBUTES:
            owner, *path = dotted.split(".")
            found = _resolve(owners[owner], path)
            # Methods are called; the few plain attributes are read or written.
            assert dotted in _kafka.VALUE_ATTRIBUTES or callable(found), dotted
    finally:
        consumer.close()
        producer.close(timeout=5)
        admin.close()


def _private_names_used(source: str) -> set[str]:
    """Underscore names read off an object (``x._name``, ``getattr(x, "_name")``, ...) in a
    module, other than casewatch's own markers (``_casewatch_*``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            found.add(node.args[1].value)
    return {
        n
        for n in found
        if n.startswith("_") and not n.startswith(("__", "_casewatch_")) and n != "_log"
    }


def test_every_private_name_the_kafka_modules_use_is_listed() -> None:
    """The list is the whole list: a private name used in ``consumers/_kafka*.py`` and in no
    entry of ``PRIVATE_ATTRIBUTES`` fails here (the names of casewatch's own modules aside)."""
    listed = {part for dotted in _kafka.PRIVATE_ATTRIBUTES for part in dotted.split(".")}
    unlisted: dict[str, set[str]] = {}
    for path in sorted((ROOT / "consumers").glob("_kafka*.py")):
        own = {
            node.name if not isinstance(node, ast.Assign) else getattr(node.targets[0], "id", "")
            for node in ast.parse(path.read_text()).body
            if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.Assign)
        }
        missing = _private_names_used(path.read_text()) - listed - own
        if missing:
            unlisted[path.name] = missing
    assert unlisted == {}


def test_nothing_is_patched_at_import_and_the_first_client_installs_the_connection_fixes() -> None:
    """Importing the Kafka source patches no class of kafka-python; building a client puts
    the two connection fixes in place (and only they are class-level)."""
    script = """
from consumers import kafka_source, dlq, producer
from consumers._kafka import KafkaConsumer, kafka
take = kafka.consumer.fetcher.Fetcher.PartitionRecords.take
connect = kafka.net.inet.KafkaNetSocket.sock_connect
close = kafka.net.manager.KafkaConnectionManager.close
before = [getattr(f, m, False) for f, m in (
    (take, "fails_unreadable"), (connect, "closes_on_failure"), (close, "closes_every_socket"))]
KafkaConsumer(bootstrap_servers="127.0.0.1:1", api_version=(2, 8)).close()
after = [
    getattr(kafka.consumer.fetcher.Fetcher.PartitionRecords.take, "fails_unreadable", False),
    getattr(kafka.net.inet.KafkaNetSocket.sock_connect, "closes_on_failure", False),
    getattr(kafka.net.manager.KafkaConnectionManager.close, "closes_every_socket", False),
]
print(before, after)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[False,", "False,", "False]", "[False,", "True,", "True]"]


class _Bare:
    """A client object without the private attributes (as after a kafka-python rename)."""


class _Parked:
    def __init__(self) -> None:
        self.drained = False

    def drain(self) -> None:
        self.drained = True


class _Fetcher:
    """A fetcher with only ``_paused_partition_records`` of the four places."""

    def __init__(self) -> None:
        self._paused_partition_records = {_kafka.KafkaTopicPartition("t", 0): _Parked()}


def test_a_missing_private_attribute_falls_back_with_a_warning() -> None:
    _kafka._warned.clear()
    with capture_logs() as logs:
        _kafka_group.finish_pending_join(_Bare(), timeout_ms=10)  # nothing to finish: no error

        async def done() -> str:
            return "result"

        # Without the I/O loop's wait_for, the future is simply awaited.
        assert asyncio.run(_kafka.wait_within(_Bare(), done(), 1.0)) == "result"
        _kafka_group.finish_pending_join(_Bare(), timeout_ms=10)  # warned once per workaround
        # No leader known and no member id taken: the source rejoins as a fresh member instead.
        assert _kafka_group.remember_join_leader(_Bare()) is False
        assert _kafka_group.joined_leader(_Bare()) is None
        assert _kafka_group.take_member_id(_Bare(), "departed-leader") is False
        # A fetcher that lost all but one of the places a fetched partition is kept in: what
        # is there is dropped, and each missing one is named.
        consumer = _Bare()
        consumer._fetcher = _Fetcher()  # type: ignore[attr-defined]
        _kafka_fetch.discard_fetched(consumer, TopicPartition("t", 0))
        assert consumer._fetcher._paused_partition_records == {}  # type: ignore[attr-defined]
        # A fetcher without ``fetched_records`` keeps the library's own (nothing wrapped).
        assert _kafka_fetch.release_parked_records(consumer) is False
        # The broker cannot be recognised: the caller keeps Kafka's semantics.
        assert _kafka.cluster_id(_Bare(), "t") is None
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert [w["workaround"] for w in warnings] == [
        "finish_pending_join",
        "wait_within",
        "remember_join_leader",
        "take_member_id",
        "discard_fetched.next_partition_records",
        "discard_fetched.paused_completed_fetches",
        "discard_fetched.next_in_line_exception",
        "release_parked_records",
        "cluster_id",
    ]
    assert all("kafka_python" in w for w in warnings)


def test_a_refused_connection_leaves_no_socket_open() -> None:
    # kafka-python 3.0.12 left each failed attempt's socket to the garbage collector (one
    # ResourceWarning per retry while a broker is down).
    import socket

    from consumers.tansu import free_port

    _kafka.install_connection_fixes()  # as the first client built does
    connector = _kafka.kafka.net.inet.KafkaNetSocket()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    attempt = connector.sock_connect(None, sock, ("127.0.0.1", free_port()))
    # Refused at once on loopback (or, if it had to wait, failing on the missing I/O loop):
    # either way the attempt fails, and the socket must be closed.
    with pytest.raises((_kafka.kafka.errors.KafkaConnectionError, AttributeError)):
        attempt.send(None)
    assert sock.fileno() == -1


def _sockets_to(port: int) -> int:
    import psutil

    return sum(
        1
        for c in psutil.Process().net_connections(kind="tcp")
        if c.raddr and c.raddr.port == port and c.status != psutil.CONN_CLOSE_WAIT
    )


@pytest.mark.integration
def test_close_producer_has_closed_the_producers_sockets_when_it_returns(
    tansu_broker: EmbeddedBroker, kafka_topic: str
) -> None:
    """kafka-python's close(timeout=0) only flags its sender thread, which closes the sockets
    later on its own: under load, after the caller has moved on, or never (the garbage
    collector then finds them: an "unclosed socket" warning in some later test). The producer
    of the dead-letter queue and of `casewatch produce` is closed by ``close_producer``, which
    must leave nothing open."""
    port = int(tansu_broker.bootstrap.rsplit(":", 1)[1])
    before = _sockets_to(port)
    producer = KafkaProducer(bootstrap_servers=tansu_broker.bootstrap, acks="all")
    producer.send(kafka_topic, b"one").get(timeout=30)
    assert _sockets_to(port) > before
    assert _kafka.close_producer(producer, 10.0) is True
    assert _sockets_to(port) == before
    assert not producer._sender.is_alive()


@pytest.mark.integration
def test_a_partition_paused_while_its_records_were_handed_out_is_read_to_its_end_once_resumed(
    tansu_broker: EmbeddedBroker,
) -> None:
    """kafka-python 3.0.12 parks the records of a partition paused half-read and brings them
    back only when its in-line slot is None; records of another partition read to their end
    stay in that slot, empty and not None, and the resumed partition would never be handed
    out or fetched again (a daemon under backpressure pauses every partition; the stall showed
    as a commit stuck below the end). ``release_parked_records`` clears the empty slot."""
    topic = f"test.parked.{uuid.uuid4().hex[:8]}"
    create_topics(tansu_broker.bootstrap, [topic], partitions=2)
    for p in range(2):
        produce(tansu_broker.bootstrap, topic, [b"x%d" % i for i in range(100)], partition=p)
    consumer = KafkaConsumer(
        bootstrap_servers=tansu_broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=10,
    )
    assert _kafka_fetch.release_parked_records(consumer)
    kafka = _kafka.kafka
    tps = [kafka.TopicPartition(topic, p) for p in range(2)]
    got: dict[Any, list[int]] = {tp: [] for tp in tps}
    fetcher: Any = consumer._fetcher

    def read() -> None:
        for tp, records in consumer.poll(timeout_ms=50).items():
            got[tp] += [r.offset for r in records]

    def half_read() -> Any:
        """The partition whose records are being handed out, some of them already."""
        read()
        current = fetcher._next_partition_records
        if current and 0 < len(got[current.topic_partition]) < 100:
            return current.topic_partition
        return None

    try:
        consumer.assign(tps)
        wait_for(lambda: half_read() is not None, what="one partition half read")
        paused = fetcher._next_partition_records.topic_partition
        other = next(tp for tp in tps if tp != paused)
        consumer.pause(paused)
        wait_for(lambda: (read(), len(got[other]) == 100)[1], what="the other partition read")
        assert paused in fetcher._paused_partition_records  # parked, and not fetched again
        consumer.resume(paused)
        wait_for(lambda: (read(), len(got[paused]) == 100)[1], what="the resumed partition read")
        assert got == {tp: list(range(100)) for tp in tps}  # each record once, in order
    finally:
        consumer.close()
        delete_topics(tansu_broker.bootstrap, [topic])
