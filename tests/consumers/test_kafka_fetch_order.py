"""The fetch order of casewatch's consumers (consumers/_kafka_fetch_order.py): a partition a
full response left out is fetched again at once, not after the rest of the response is read.

The ordering itself is checked on kafka-python's own ``FetchResponse`` objects; the effect on
every broker of the contract suite, where the consumer is made to fill its responses
(``fetch_max_bytes`` of one byte: a broker returns the first batch it has and leaves the other
partitions out, KIP-74)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from structlog.testing import capture_logs

from consumers import _kafka
from consumers._kafka import KafkaConsumer, kafka
from consumers._kafka_fetch_order import left_out_first, refetch_left_out
from consumers.tansu import FETCH_MAX_WAIT_MS
from tests.fixtures.broker import ContractBroker, produce
from tests.support.waiting import wait_for

Response = kafka.protocol.consumer.fetch.FetchResponse
TopicData = Response.FetchableTopicResponse
Partition = TopicData.PartitionData
KafkaTP = kafka.TopicPartition


@pytest.fixture(autouse=True)
def _optimisation_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the optimisation itself: on, even in the contract suite's run
    with CASEWATCH_KAFKA_OPTIMISATIONS=off."""
    monkeypatch.delenv(_kafka.OPTIMISATIONS_ENV, raising=False)


def partition(
    index: int, *, records: bytes | None, hw: int, lso: int | None = None, error: int = 0
) -> Any:
    return Partition(
        partition_index=index,
        error_code=error,
        high_watermark=hw,
        last_stable_offset=hw if lso is None else lso,
        records=records,
    )


def response(*topics: tuple[str, list[Any]]) -> Any:
    return Response(
        version=12,
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[TopicData(topic=name, partitions=parts) for name, parts in topics],
    )


def order(resp: Any) -> list[tuple[str, int]]:
    return [(t.topic, p.partition_index) for t in resp.responses for p in t.partitions]


def test_a_left_out_partition_goes_first_and_every_other_keeps_its_place() -> None:
    resp = response(
        (
            "turns",
            [
                partition(0, records=b"batch", hw=100),  # records: read first by the library
                partition(1, records=None, hw=10),  # caught up (fetched from 10): keeps its place
                partition(2, records=b"", hw=50, error=6),  # an error: its place, so it surfaces
                partition(3, records=None, hw=80),  # left out: 80 > 20
                partition(4, records=b"", hw=90),  # left out (empty bytes, as some brokers send)
            ],
        ),
        ("other", [partition(0, records=b"b", hw=9), partition(1, records=None, hw=7)]),
    )
    offsets = {KafkaTP("turns", i): o for i, o in enumerate([0, 10, 0, 20, 30])}
    offsets |= {KafkaTP("other", 0): 0, KafkaTP("other", 1): 3}
    left_out_first(resp, offsets, read_committed=False)
    assert order(resp) == [
        ("turns", 3),
        ("turns", 4),
        ("turns", 0),
        ("turns", 1),
        ("turns", 2),
        ("other", 1),
        ("other", 0),
    ]


def test_under_read_committed_the_last_stable_offset_decides() -> None:
    # Records past the offset, but in a transaction still open: a refetch would find none.
    parts = [partition(0, records=b"batch", hw=100), partition(1, records=None, hw=40, lso=20)]
    resp = response(("turns", parts))
    offsets = {KafkaTP("turns", 0): 0, KafkaTP("turns", 1): 20}
    left_out_first(resp, offsets, read_committed=True)
    assert order(resp) == [("turns", 0), ("turns", 1)]
    left_out_first(resp, offsets, read_committed=False)
    assert order(resp) == [("turns", 1), ("turns", 0)]


def test_a_partition_not_asked_for_is_left_in_place() -> None:
    resp = response(("turns", [partition(0, records=b"x", hw=5), partition(1, records=None, hw=5)]))
    left_out_first(resp, {KafkaTP("turns", 0): 0}, read_committed=False)
    assert order(resp) == [("turns", 0), ("turns", 1)]


class _Fetcher:
    def __init__(self) -> None:
        self.seen: list[Any] = []
        self._isolation_level = kafka.consumer.fetcher.IsolationLevel.READ_UNCOMMITTED

    def _handle_fetch_response(self, node_id: Any, offsets: Any, sent: Any, resp: Any) -> str:
        self.seen.append(resp)
        return "handled"


def _consumer(fetcher: Any) -> Any:
    """A consumer as far as the installer looks: its fetcher."""
    return SimpleNamespace(_fetcher=fetcher)


def test_the_library_handler_gets_the_reordered_response() -> None:
    fetcher = _Fetcher()
    assert refetch_left_out(_consumer(fetcher)) is True
    resp = response(("turns", [partition(0, records=b"x", hw=9), partition(1, records=None, hw=9)]))
    offsets = {KafkaTP("turns", 0): 0, KafkaTP("turns", 1): 0}
    assert fetcher._handle_fetch_response(1, offsets, 0.0, resp) == "handled"
    assert fetcher.seen == [resp] and order(resp) == [("turns", 1), ("turns", 0)]


def test_a_response_shaped_otherwise_is_passed_on_as_it_is() -> None:
    fetcher = _Fetcher()
    refetch_left_out(_consumer(fetcher))
    odd = type("Odd", (), {"responses": [object()]})()  # no topic, no partitions
    _kafka._warned.discard("refetch_left_out")  # logged once per process
    with capture_logs() as logs:
        assert fetcher._handle_fetch_response(1, {}, 0.0, odd) == "handled"
    assert fetcher.seen == [odd]
    assert [e["workaround"] for e in logs] == ["refetch_left_out"]


def test_without_the_handler_the_consumer_keeps_the_library_order() -> None:
    _kafka._warned.discard("refetch_left_out")
    with capture_logs() as logs:
        assert refetch_left_out(_consumer(object())) is False
    assert logs[0]["attribute"] == "KafkaConsumer._fetcher._handle_fetch_response"


@pytest.mark.integration
@pytest.mark.deviates("noida", "ignores fetch_max_bytes: every partition comes with records")
def test_the_left_out_partition_is_fetched_while_the_first_is_still_read(
    kafka_broker: ContractBroker, two_partitions: str
) -> None:
    value = b"x" * 1000
    for p in (0, 1):
        produce(kafka_broker.bootstrap, two_partitions, [value] * 30, partition=p)
    consumer = KafkaConsumer(
        bootstrap_servers=kafka_broker.bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_bytes=1,  # the broker returns its first batch and leaves the rest out
        fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
    )
    try:
        assert refetch_left_out(consumer) is True
        fetcher = consumer._fetcher
        installed = fetcher._handle_fetch_response
        answers: list[dict[int, bool]] = []  # per response: partition -> came with records

        def record(node_id: Any, offsets: Any, sent: Any, resp: Any) -> Any:
            answers.append(
                {p.partition_index: bool(p.records) for t in resp.responses for p in t.partitions}
            )
            return installed(node_id, offsets, sent, resp)

        fetcher._handle_fetch_response = record
        consumer.assign([KafkaTP(two_partitions, 0), KafkaTP(two_partitions, 1)])
        got: dict[Any, list[Any]] = {}
        wait_for(
            lambda: got.update(consumer.poll(timeout_ms=200, max_records=1)) or got, "a record"
        )
        (first,) = got
        other = 1 - first.partition
        assert answers[0] == {first.partition: True, other: False}  # the other one left out
        # The poll that waited for the response returns without fetching (kafka-python's
        # fetch_records); the next one, still reading the first partition, fetches the other.
        assert list(consumer.poll(timeout_ms=0, max_records=1)) == [first]
        wait_for(lambda: any(a.get(other) for a in answers[1:]), "the left-out partition's records")
        current = fetcher._next_partition_records
        assert current is not None and current.topic_partition == first  # still being read
    finally:
        consumer.close()
