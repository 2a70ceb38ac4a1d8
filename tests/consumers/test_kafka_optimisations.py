"""The kafka-python optimisations (the record reader, the fetch order) are optional: each checks
the library's names when it is installed on a consumer and keeps the library's behaviour on a
miss (one warning), a switch turns them off, and the guard on ``take`` calls a batch unreadable
only for kafka-python's or a codec's error: casewatch's own reader failing (a renamed private
at read time) takes the reader off its consumer, never holds the partition as corrupt."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from structlog.testing import capture_logs

from consumers import _kafka, _kafka_records
from consumers._kafka import OPTIMISATIONS_ENV, kafka
from consumers._kafka_fetch import fail_unreadable_batches
from consumers._kafka_fetch_order import refetch_left_out
from consumers._kafka_records import RawRecords, read_raw_records
from consumers.kafka_source import KafkaTurnSource
from consumers.patch_fallbacks import SWITCH, fallback_states
from consumers.records import RawMessage
from consumers.tansu import EmbeddedBroker
from consumers.unreadable import CODEC_UNAVAILABLE, CORRUPT, UnreadableBatch
from monitor.errors import UnreadableBatchError
from tests.fixtures.broker import produce
from tests.support.kafka import poll_until, source_config

fetcher_module = kafka.consumer.fetcher
LibraryRecords = fetcher_module.Fetcher.PartitionRecords
MemoryRecords = kafka.record.memory_records.MemoryRecords
MemoryRecordsBuilder = kafka.record.memory_records.MemoryRecordsBuilder
default_records = kafka.record.default_records
TP = kafka.TopicPartition("turns", 0)


@pytest.fixture(autouse=True)
def _optimisations_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the optimisations: on, whatever the run's switch says."""
    monkeypatch.delenv(OPTIMISATIONS_ENV, raising=False)
    for name in ("read_raw_records", "refetch_left_out", "fail_unreadable_batches"):
        _kafka._warned.discard(name)  # warned once per process: each test sees its own


def batch(values: list[bytes], codec: int = 0) -> bytes:
    builder = MemoryRecordsBuilder(2, codec, 1 << 20, offset=0)
    for i, value in enumerate(values):
        builder.append(1_700_000_000_000 + i, None, value, [])
    builder.close()
    return bytes(builder.buffer())


def fetcher(records_class: Any, **config: Any) -> Any:
    """A fetcher as far as the installers look: its reader class and configuration."""
    return SimpleNamespace(
        PartitionRecords=records_class,
        config={"key_deserializer": None, "value_deserializer": None, **config},
    )


def guarded(records_class: Any) -> Any:
    found = fetcher(records_class)
    assert fail_unreadable_batches(SimpleNamespace(_fetcher=found)) is True
    return found


def read(found: Any, data: bytes, **kwargs: Any) -> Any:
    return found.PartitionRecords(0, TP, MemoryRecords(data), **kwargs)


def warnings_of(logs: Sequence[Mapping[str, Any]], workaround: str) -> list[Mapping[str, Any]]:
    return [e for e in logs if e["log_level"] == "warning" and e.get("workaround") == workaround]


# ------------------------------------------------------------------------ the guard on take


@pytest.mark.parametrize("reader", [LibraryRecords, RawRecords], ids=["library", "casewatch"])
def test_a_batch_failing_its_crc_is_unreadable_and_corrupt(reader: Any) -> None:
    data = bytearray(batch([b"a", b"b"]))
    data[-3] ^= 0xFF
    records = read(guarded(reader), bytes(data))
    with pytest.raises(UnreadableBatchError) as raised:
        records.take(5)
    assert raised.value.reason == CORRUPT
    assert isinstance(raised.value.cause, kafka.errors.CorruptRecordError)
    with pytest.raises(UnreadableBatchError):  # again at each take, until the source drops it
        records.take(5)


@pytest.mark.parametrize("reader", [LibraryRecords, RawRecords], ids=["library", "casewatch"])
def test_a_batch_that_does_not_decompress_is_unreadable_and_corrupt(
    reader: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Flagged gzip, not gzip, with a valid CRC: only the codec can tell.
    with monkeypatch.context() as patched:
        patched.setattr(default_records, "gzip_encode", lambda *_a, **_k: b"\x1f\x8bnot gzip")
        data = batch([b"lost"], codec=1)
    with pytest.raises(UnreadableBatchError) as raised:
        read(guarded(reader), data).take(5)
    assert raised.value.reason == CORRUPT
    assert not isinstance(raised.value.cause, kafka.errors.KafkaError)  # the codec's own


def test_a_codec_that_is_not_installed_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    data = batch([b"x" * 200], codec=1)  # compressed: worth it at this size
    monkeypatch.setattr(default_records.DefaultRecordBatch, "_assert_has_codec", _no_codec)
    with pytest.raises(UnreadableBatchError) as raised:
        read(guarded(LibraryRecords), data).take(5)
    assert raised.value.reason == CODEC_UNAVAILABLE


def _no_codec(self: Any, compression_type: int) -> None:
    raise kafka.errors.UnsupportedCodecError(f"codec {compression_type} not installed")


def test_an_attribute_error_in_casewatchs_reader_is_not_a_corrupt_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A private renamed under the reader shows at read time as an AttributeError: the reader
    is taken off the consumer (one warning), the partition's records are dropped without an
    error, and the library's reader reads the same batch."""
    data = batch([b"a", b"b", b"c"])
    found = guarded(RawRecords)
    first = read(found, data)
    installed = found.PartitionRecords

    def renamed(*_args: Any) -> Any:
        raise AttributeError("'DefaultRecordBatch' object has no attribute '_header_data'")

    with capture_logs() as logs:
        with monkeypatch.context() as patched:
            patched.setattr(_kafka_records, "_batch", renamed)
            assert first.take(5) == []  # not UnreadableBatchError
            assert not first  # drained: the fetcher fetches the partition again
        again = read(found, data)
        assert [r.value for r in again.take(5)] == [b"a", b"b", b"c"]
        # the library's reader, guarded in turn: a corrupt batch is still held
        assert found.PartitionRecords is not installed
        assert issubclass(found.PartitionRecords, LibraryRecords)
        assert RawRecords is not None and not issubclass(found.PartitionRecords, RawRecords)
        assert found.PartitionRecords.fails_unreadable is True
        assert first.take(5) == []  # drained stays drained, nothing more to warn about
    [warning] = warnings_of(logs, "read_raw_records")
    assert "AttributeError" in warning["attribute"] and "_header_data" in warning["attribute"]


def test_an_attribute_error_in_the_librarys_reader_is_passed_on_as_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not casewatch's reader, not the batch: not called corrupt either."""
    data = batch([b"a"])
    monkeypatch.delattr(default_records.DefaultRecordBatch, "_maybe_uncompress")
    with pytest.raises(AttributeError):
        read(guarded(LibraryRecords), data).take(5)


# ----------------------------------------------------------------- checked when installed


def test_the_reader_with_a_renamed_private_is_not_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(LibraryRecords, "_contains_abort_marker")
    found = fetcher(LibraryRecords)
    with capture_logs() as logs:
        assert read_raw_records(SimpleNamespace(_fetcher=found)) is False
        assert read_raw_records(SimpleNamespace(_fetcher=fetcher(LibraryRecords))) is False
    assert found.PartitionRecords is LibraryRecords
    [warning] = warnings_of(logs, "read_raw_records")  # once per process
    assert warning["attribute"].endswith("PartitionRecords._contains_abort_marker")


def test_the_reader_is_not_installed_where_it_reads_a_batch_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The names all there, the layout changed (the header's fields in another order): the
    installation's own read of a batch tells."""
    monkeypatch.setattr(_kafka_records, "_RECORDS_COUNT", _kafka_records._BASE_OFFSET)
    found = fetcher(LibraryRecords)
    with capture_logs() as logs:
        assert read_raw_records(SimpleNamespace(_fetcher=found)) is False
    assert found.PartitionRecords is LibraryRecords
    assert len(warnings_of(logs, "read_raw_records")) == 1


def test_the_fetch_order_needs_the_fetchers_isolation_level() -> None:
    found = SimpleNamespace(_handle_fetch_response=lambda *a: None)
    with capture_logs() as logs:
        assert refetch_left_out(SimpleNamespace(_fetcher=found)) is False
    assert warnings_of(logs, "refetch_left_out")[0]["attribute"].endswith("._isolation_level")


def test_the_switch_turns_both_optimisations_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OPTIMISATIONS_ENV, "off")
    found = fetcher(LibraryRecords)
    original = object()
    found._handle_fetch_response = original
    found._isolation_level = fetcher_module.IsolationLevel.READ_UNCOMMITTED
    with capture_logs() as logs:
        assert read_raw_records(SimpleNamespace(_fetcher=found)) is False
        assert refetch_left_out(SimpleNamespace(_fetcher=found)) is False
    assert found.PartitionRecords is LibraryRecords
    assert found._handle_fetch_response is original
    assert not [e for e in logs if e["log_level"] == "warning"]  # chosen, not a fallback
    # ... so the fallback gauge says 0 for both: the alert is for a library that moved.
    states = fallback_states(_kafka.OPTIMISATIONS, _kafka.workarounds_off())
    assert (states["read_raw_records"], states["refetch_left_out"]) == (False, False)


def test_a_switch_value_neither_on_nor_off_is_one_bounded_fallback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_kafka, "_warned", set())  # this process's fallbacks, for this test
    monkeypatch.setenv(OPTIMISATIONS_ENV, "fast-please")
    assert _kafka.optimisation_on("read_raw_records") is True  # kept on, with one warning
    states = fallback_states(_kafka.OPTIMISATIONS, _kafka.workarounds_off())
    assert states == {"read_raw_records": False, "refetch_left_out": False, SWITCH: True}


# --------------------------------------------------------------- on a consumer, end to end


def _source(broker: EmbeddedBroker, topic: str) -> KafkaTurnSource:
    return KafkaTurnSource(source_config(broker, topic, group=f"opt-{uuid.uuid4().hex[:8]}"))


def _read_all(source: KafkaTurnSource, n: int) -> list[RawMessage]:
    failures: list[UnreadableBatch] = []
    source.set_unreadable_listener(failures.append)
    got = poll_until(source, n)
    assert failures == []  # nothing held as unreadable
    return got


@pytest.mark.integration
def test_a_consumer_whose_reader_misses_a_private_still_delivers_every_record(
    tansu_broker: EmbeddedBroker,
    kafka_topic: str,
    sources: list[KafkaTurnSource],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    values = [b"v%d" % i for i in range(20)]
    produce(tansu_broker.bootstrap, kafka_topic, values)
    monkeypatch.delattr(LibraryRecords, "_is_batch_aborted")  # renamed by an upgrade, say
    with capture_logs() as logs:
        source = _source(tansu_broker, kafka_topic)
        sources.append(source)
        got = _read_all(source, len(values))
    assert [(m.offset, m.value) for m in got] == list(enumerate(values))
    [warning] = warnings_of(logs, "read_raw_records")
    assert warning["attribute"].endswith("._is_batch_aborted")
    # What the daemon's casewatch_kafka_patch_fallback gauge reports for this source.
    states = source.patch_fallbacks()
    assert (states["read_raw_records"], states["refetch_left_out"]) == (True, False)


@pytest.mark.integration
def test_a_reader_failing_at_read_time_gives_way_to_the_librarys_and_holds_nothing(
    tansu_broker: EmbeddedBroker,
    kafka_topic: str,
    sources: list[KafkaTurnSource],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    values = [b"v%d" % i for i in range(20)]
    produce(tansu_broker.bootstrap, kafka_topic, values)
    calls: list[int] = []

    def renamed(*_args: Any) -> Any:
        calls.append(1)
        raise AttributeError("'DefaultRecordBatch' object has no attribute '_buffer'")

    with capture_logs() as logs:
        source = _source(tansu_broker, kafka_topic)  # installed: the library fits it
        sources.append(source)
        monkeypatch.setattr(_kafka_records, "_batch", renamed)  # ... then a read fails
        got = _read_all(source, len(values))
    assert calls  # the reader did run, and failed
    assert [(m.offset, m.value) for m in got] == list(enumerate(values))
    assert len(warnings_of(logs, "read_raw_records")) == 1
    assert source.patch_fallbacks()["read_raw_records"] is True  # fell back at read time
    assert not [e for e in logs if "unreadable" in str(e.get("event", "")).lower()]
