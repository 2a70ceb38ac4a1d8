"""casewatch's record reader (consumers/_kafka_records.py) against kafka-python's own.

The reader replaces kafka-python's per-partition reader on casewatch's consumers, so it must
hand out exactly what the library's reader does (converted to ``RawMessage``) and leave the
reader's state exactly as the library's would: the fetch position after every ``take``, the
records and bytes read (fetch metrics), the leader epoch, and whether the fetch is drained.
Every test below runs both readers over the same bytes and compares; batches are written by
kafka-python's own record builders, of every message format and codec, with keys, headers,
null values, and varints of one to four bytes.
"""

from __future__ import annotations

import struct
from collections import namedtuple
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from consumers import _kafka
from consumers._kafka import kafka
from consumers._kafka_fetch import fail_unreadable_batches
from consumers._kafka_records import RawRecords, read_raw_records, to_raw
from consumers.records import RawMessage
from monitor.errors import UnreadableBatchError

fetcher_module = kafka.consumer.fetcher
LibraryRecords = fetcher_module.Fetcher.PartitionRecords
IsolationLevel = fetcher_module.IsolationLevel
KafkaTP = kafka.TopicPartition
MemoryRecords = kafka.record.memory_records.MemoryRecords
MemoryRecordsBuilder = kafka.record.memory_records.MemoryRecordsBuilder
DefaultRecordBatch = kafka.record.default_records.DefaultRecordBatch
CorruptRecordError = kafka.errors.CorruptRecordError
Aborted = namedtuple("Aborted", "producer_id first_offset")

TP = KafkaTP("turns", 3)
CODECS = [0, 1, 2, 3, 4]  # none, gzip, snappy, lz4, zstd: casewatch installs them all


@pytest.fixture(autouse=True)
def _optimisation_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the optimisation itself: on, even in the contract suite's run
    with CASEWATCH_KAFKA_OPTIMISATIONS=off."""
    monkeypatch.delenv(_kafka.OPTIMISATIONS_ENV, raising=False)


def test_the_pinned_kafka_python_has_what_the_reader_replaces() -> None:
    assert RawRecords is not None and issubclass(RawRecords, LibraryRecords)
    assert RawRecords._unpack_records is not LibraryRecords._unpack_records


def build(
    batches: list[tuple[int, int, list[tuple[Any, ...]]]],
    *,
    first_offset: int = 0,
    transactional: tuple[int, int] | None = None,
) -> tuple[bytes, list[int]]:
    """Concatenated batches ``(magic, codec, records)``, records ``(timestamp, key, value,
    headers)``; returns the bytes and each batch's base offset."""
    out = b""
    bases = []
    offset = first_offset
    for magic, codec, records in batches:
        extra: dict[str, Any] = {}
        if transactional is not None and magic == 2:
            extra = {
                "transactional": True,
                "producer_id": transactional[0],
                "producer_epoch": 0,
                "base_sequence": 0,
            }
        builder = MemoryRecordsBuilder(magic, codec, 1 << 24, offset=offset, **extra)
        for ts, key, value, headers in records:
            builder.append(ts, key, value, headers if magic == 2 else None)
        builder.close()
        out += bytes(builder.buffer())
        bases.append(offset)
        offset += len(records)
    return out, bases


def readers(data: bytes, fetch_offset: int = 0, **kwargs: Any) -> tuple[Any, Any]:
    ours = RawRecords(fetch_offset, TP, MemoryRecords(data), **kwargs)  # type: ignore[misc]
    library = LibraryRecords(fetch_offset, TP, MemoryRecords(data), **kwargs)
    return ours, library


def guarded_reader(data: bytes, **kwargs: Any) -> Any:
    """Casewatch's reader as a consumer gets it: with the guarded ``take`` installed."""
    fetcher = SimpleNamespace(PartitionRecords=RawRecords)
    assert fail_unreadable_batches(SimpleNamespace(_fetcher=fetcher)) is True
    return fetcher.PartitionRecords(0, TP, MemoryRecords(data), **kwargs)


def state(reader: Any) -> tuple[Any, ...]:
    return (
        reader.next_fetch_offset,
        reader.records_read,
        reader.bytes_read,
        reader.leader_epoch,
        bool(reader),
    )


def take(reader: Any, n: int) -> tuple[list[RawMessage], str | None]:
    """What one ``take`` gives: records (converted) or the error it raises."""
    try:
        return [to_raw(r) for r in reader.take(n)], None
    except Exception as exc:  # compared by type and message
        return [], f"{type(exc).__name__}: {exc}"


def assert_same(data: bytes, steps: list[int], fetch_offset: int = 0, **kwargs: Any) -> None:
    ours, library = readers(data, fetch_offset, **kwargs)
    for n in steps:
        got, expected = take(ours, n), take(library, n)
        assert got == expected
        assert all(type(r) is RawMessage for r in got[0])
        assert state(ours) == state(library)


header = st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=16)))
record = st.tuples(
    # timestamp deltas (zigzag varints) of one byte, two bytes and more, either sign
    st.one_of(
        st.integers(-63, 63),
        st.integers(64, 8191),
        st.integers(-8192, -64),
        st.integers(8192, 10**9),
    ).map(lambda delta: 1_700_000_000_000 + delta),
    st.one_of(st.none(), st.binary(max_size=20), st.binary(min_size=64, max_size=100)),
    st.one_of(st.none(), st.binary(max_size=300), st.builds(bytes, st.integers(8200, 70_000))),
    st.lists(header, max_size=3),
)
records = st.lists(record, min_size=1, max_size=12)
# v0/v1 message sets know gzip and snappy only (kafka-python writes their lz4 with xxhash)
batch = st.one_of(
    st.tuples(st.just(2), st.sampled_from(CODECS), records),
    st.tuples(st.sampled_from([0, 1]), st.sampled_from([0, 1, 2]), records),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(batch, min_size=1, max_size=4),
    first_offset=st.sampled_from([0, 5, 10_000, 2**30]),
    steps=st.lists(st.integers(min_value=1, max_value=20), min_size=1, max_size=8),
    skip=st.integers(min_value=0, max_value=20),
)
def test_every_format_and_codec_reads_as_the_library_reads_it(
    batches: list[tuple[int, int, list[tuple[Any, ...]]]],
    first_offset: int,
    steps: list[int],
    skip: int,
) -> None:
    data, _ = build(batches, first_offset=first_offset)
    # a fetch from inside a batch skips the records before its offset, as the library does
    assert_same(data, [*steps, 10_000], fetch_offset=first_offset + skip)


def test_a_long_batch_takes_multi_byte_offset_deltas_and_stops_inside_it() -> None:
    records = [(1_700_000_000_000 + i * 37, None, b"v%d" % i, []) for i in range(20_000)]
    data, _ = build([(2, 0, records)])
    assert_same(data, [500, 7000, 1, 9000, 10_000])
    ours, _ = readers(data)
    first = ours.take(3)
    assert [r.offset for r in first] == [0, 1, 2] and ours.next_fetch_offset == 3


def test_headers_keys_nulls_and_timestamps_come_out_as_the_source_returns_them() -> None:
    data, _ = build(
        [(2, 0, [(1_700_000_000_123, b"k", None, [("trace", b"abc"), ("empty", None)])])]
    )
    ours, _ = readers(data)
    (message,) = ours.take(10)
    headers = (("trace", b"abc"), ("empty", b""))
    assert message == RawMessage("turns", 3, 0, None, b"k", headers, 1_700_000_000_123)


def _with_attributes(data: bytes, extra: int) -> bytes:
    """A v2 batch with attribute bits added and its CRC recomputed (kafka-python's builder
    writes no control batches)."""
    buf = bytearray(data)
    (attributes,) = struct.unpack_from(">h", buf, DefaultRecordBatch.ATTRIBUTES_OFFSET)
    struct.pack_into(">h", buf, DefaultRecordBatch.ATTRIBUTES_OFFSET, attributes | extra)
    crc = kafka.record.util.calc_crc32c(memoryview(buf)[DefaultRecordBatch.ATTRIBUTES_OFFSET :])
    struct.pack_into(">I", buf, DefaultRecordBatch.CRC_OFFSET, crc)
    return bytes(buf)


CONTROL = 0x20
ABORT_MARKER = struct.pack(">hh", 0, 0)
COMMIT_MARKER = struct.pack(">hh", 0, 1)


def _transaction(producer: int, first: int, values: list[bytes], marker: bytes) -> bytes:
    records = [(1_700_000_000_000, None, v, []) for v in values]
    data, _ = build([(2, 0, records)], first_offset=first, transactional=(producer, 0))
    end, _ = build(
        [(2, 0, [(1_700_000_000_001, marker, b"", [])])],
        first_offset=first + len(values),
        transactional=(producer, 0),
    )
    return data + _with_attributes(end, CONTROL)


@pytest.mark.parametrize("isolation", ["READ_COMMITTED", "READ_UNCOMMITTED"])
def test_aborted_transactions_and_control_batches_are_skipped_as_the_library_skips_them(
    isolation: str,
) -> None:
    data = (
        _transaction(7, 0, [b"kept-1", b"kept-2"], COMMIT_MARKER)
        + _transaction(8, 3, [b"aborted-1", b"aborted-2"], ABORT_MARKER)
        + _transaction(7, 6, [b"kept-3"], COMMIT_MARKER)
    )
    kwargs = {
        "isolation_level": getattr(IsolationLevel, isolation),
        "aborted_transactions": [Aborted(8, 3)],
    }
    assert_same(data, [1, 100, 100], **kwargs)
    ours, _ = readers(data, **kwargs)
    values = [r.value for r in ours.take(100)]
    if isolation == "READ_COMMITTED":
        assert values == [b"kept-1", b"kept-2", b"kept-3"]
    else:
        assert values == [b"kept-1", b"kept-2", b"aborted-1", b"aborted-2", b"kept-3"]


def test_a_batch_failing_its_crc_raises_as_the_library_raises() -> None:
    data = bytearray(build([(2, 0, [(1_700_000_000_000, None, b"x" * 50, [])] * 3)])[0])
    data[-10] ^= 0xFF
    assert_same(bytes(data), [2, 2, 2])
    ours = guarded_reader(bytes(data))
    # the consumer's guarded take (consumers/_kafka_fetch.py) names the partition and offset
    with pytest.raises(UnreadableBatchError, match="failed crc check") as raised:
        ours.take(2)
    assert isinstance(raised.value.__cause__, CorruptRecordError)


def test_a_record_that_does_not_parse_raises_when_reached_after_the_records_before_it() -> None:
    records = [(1_700_000_000_000, None, b"x" * 50, [])] * 3
    data = bytearray(build([(2, 0, records)])[0])
    # the third record's length varint claims more than it holds (the CRC is not checked)
    third = len(data) - (len(data) - DefaultRecordBatch.HEADER_STRUCT.size) // 3
    data[third] = 0x7E
    assert_same(bytes(data), [1, 5, 5], check_crcs=False)
    ours = guarded_reader(bytes(data), check_crcs=False)
    assert [r.offset for r in ours.take(5)] == [0, 1]
    with pytest.raises(UnreadableBatchError, match="at offset 2: CorruptRecordError"):
        ours.take(5)


class _Fetcher:
    def __init__(self, **config: Any) -> None:
        self.config = {"key_deserializer": None, "value_deserializer": None, **config}
        self.PartitionRecords = LibraryRecords


def _consumer(fetcher: Any) -> Any:
    """A consumer as far as the installer looks: its fetcher."""
    return SimpleNamespace(_fetcher=fetcher)


def test_a_consumer_gets_the_reader_unless_it_deserializes_or_lacks_the_fetcher() -> None:
    plain = _Fetcher()
    assert read_raw_records(_consumer(plain)) is True
    assert plain.PartitionRecords is RawRecords

    deserializing = _Fetcher(value_deserializer=bytes.decode)
    assert read_raw_records(_consumer(deserializing)) is False
    assert deserializing.PartitionRecords is LibraryRecords

    _kafka._warned.discard("read_raw_records")  # logged once per process
    with capture_logs() as logs:
        assert read_raw_records(_consumer(object())) is False
    assert [e["workaround"] for e in logs] == ["read_raw_records"]


def test_a_library_record_is_converted_and_a_raw_message_passed_through() -> None:
    data, _ = build([(2, 0, [(1_700_000_000_000, b"k", b"v", [("h", None)])])])
    (library_record,) = LibraryRecords(0, TP, MemoryRecords(data)).take(1)
    message = to_raw(library_record)
    assert message == RawMessage("turns", 3, 0, b"v", b"k", (("h", b""),), 1_700_000_000_000)
    assert to_raw(message) is message
