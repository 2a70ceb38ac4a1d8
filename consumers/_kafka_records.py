"""kafka-python's fetched records, read straight into ``RawMessage``: the consumer's own reader
at a third of the cost.

kafka-python 3.0.12 reads a fetched record batch in Python, record by record, through a stack
of property calls: a ``DefaultRecord`` (seven varints, each a function call, and a property per
field), then a 13-field ``ConsumerRecord`` built from it, which the source copied once more into
a ``RawMessage``. On the ingest path that was the largest cost per turn after validation
(bench/README.md, "Ingest per turn, fifth pass"). ``RawRecords`` replaces the fetcher's
per-partition reader (``Fetcher.PartitionRecords``) on casewatch's own consumers only: a
batch's records are read in one loop with the short varints inlined, and handed out as the
``RawMessage`` the source returns.

What the library's reader does, this one does too, in the same order: each batch's CRC checked
before it is read (``check_crcs``), leader epochs kept, aborted transactions and control
batches skipped under ``read_committed``, records before the fetch offset skipped, the fetch
position advanced record by record (``take(n)`` may stop inside a batch), the bytes and records
read counted for the fetch metrics, and a record that does not parse raised as kafka-python's
``CorruptRecordError`` when it is reached (``_kafka_fetch.py`` turns it into an unreadable
batch with its partition and offset). Batches of the old message formats (v0 and v1, before
Kafka 0.11) are read through the library's records, then converted.

It is installed per consumer (``read_raw_records``), never at import, and is optional: with
``CASEWATCH_KAFKA_OPTIMISATIONS=off``, for a consumer with deserializers, or for a kafka-python
it no longer fits (its names checked, and one batch read by both readers, at each
installation; logged once), the consumer keeps the library's reader and the source converts
what it returns (``to_raw``). A reader that fails at read time on anything but the batch
itself is taken off its consumer (``_kafka_fetch.fail_unreadable_batches``). Only
``_kafka*.py`` reach kafka-python.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from consumers._kafka import (
    _ABORT_MARKER,
    _ABORTED_UP_TO,
    _BATCH_ABORTED,
    _BATCH_BUFFER,
    _BATCH_HEADER,
    _BATCH_POS,
    _FETCH_CONFIG,
    _READER,
    _UNCOMPRESS,
    _UNPACK,
    _VARINT,
    READER_STATE,
    _fallback,
    kafka,
    optimisation_on,
)
from consumers.records import RawMessage

__all__ = ["read_raw_records", "to_raw"]

_fetcher_module = kafka.consumer.fetcher
_default_records = getattr(getattr(kafka, "record", None), "default_records", None)
_util = getattr(getattr(kafka, "record", None), "util", None)
_decode_varint = getattr(_util, "decode_varint", None)
_DefaultRecordBatch = getattr(_default_records, "DefaultRecordBatch", None)
_PartitionRecords = getattr(getattr(_fetcher_module, "Fetcher", None), "PartitionRecords", None)
_READ_COMMITTED = getattr(getattr(_fetcher_module, "IsolationLevel", None), "READ_COMMITTED", None)
_CorruptRecordError = kafka.errors.CorruptRecordError

# DefaultRecordBatch's header tuple (HEADER_STRUCT) and attribute bits, as kafka-python 3.0
# reads them; checked against the library by tests/consumers/test_kafka_records.py.
_BASE_OFFSET, _ATTRIBUTES, _FIRST_TIMESTAMP, _MAX_TIMESTAMP, _RECORDS_COUNT = 0, 5, 7, 8, 12
_LOG_APPEND_TIME = 0x08


def to_raw(record: Any) -> RawMessage:
    """A record as the consumer returned it: a ``RawMessage`` already, or kafka-python's
    ``ConsumerRecord`` (a consumer that kept the library's reader)."""
    if type(record) is RawMessage:
        return record
    raw_headers = record.headers
    headers = (
        tuple((str(k), bytes(v) if v is not None else b"") for k, v in raw_headers)
        if raw_headers
        else ()
    )
    ts = record.timestamp
    return RawMessage(
        record.topic,
        record.partition,
        record.offset,
        record.value,
        record.key,
        headers,
        ts if ts is not None and ts >= 0 else None,
    )


def read_raw_records(consumer: Any) -> bool:
    """Make ``consumer`` hand out ``RawMessage`` records read by ``RawRecords``; False where it
    keeps the library's reader: switched off (``CASEWATCH_KAFKA_OPTIMISATIONS=off``), records
    to deserialize, or (a warning, once) a library this reader no longer fits."""
    if not optimisation_on("read_raw_records"):
        return False
    fetcher: Any = getattr(consumer, "_fetcher", None)
    config = getattr(fetcher, "config", None)
    if not hasattr(fetcher, "PartitionRecords") or not isinstance(config, dict):
        _fallback("read_raw_records", _READER if fetcher is not None else _FETCH_CONFIG)
        return False
    missing = _reader_misfit()
    if missing is not None:
        _fallback("read_raw_records", missing)
        return False
    if config.get("key_deserializer") is not None or config.get("value_deserializer") is not None:
        return False  # records to deserialize: the library's reader does that
    fetcher.PartitionRecords = RawRecords
    return True


def _reader_misfit() -> str | None:
    """What of the library this reader relies on is missing or reads otherwise, or None.

    Checked at each installation, on the library's own objects: every private name the reader
    uses (``consumers._kafka``: the record batch's layout, the reader's state, the transaction
    helpers), then a batch of three records (keys, headers, a null value) read by both readers,
    which must agree record for record and on the position they leave. Microseconds, once per
    consumer.
    """
    if RawRecords is None or _decode_varint is None or _DefaultRecordBatch is None:
        return _UNPACK if RawRecords is None else _VARINT
    for dotted in (_UNPACK, _UNCOMPRESS, _ABORTED_UP_TO, _ABORT_MARKER, _BATCH_ABORTED):
        owner, name = dotted.rsplit(".", 1)
        if not callable(getattr(_owners().get(owner), name, None)):
            return dotted
    try:
        buffer = _sample_batch()
        batch = _DefaultRecordBatch(bytearray(buffer))
        for dotted in (_BATCH_BUFFER, _BATCH_POS, _BATCH_HEADER):
            if not hasattr(batch, dotted.rsplit(".", 1)[1]):
                return dotted
        tp = kafka.TopicPartition("casewatch.check", 0)
        library: Any = _PartitionRecords  # not None: RawRecords is its subclass
        theirs = library(1, tp, _memory_records(buffer))
        ours = RawRecords(1, tp, _memory_records(buffer))
        for dotted in READER_STATE:
            if not hasattr(ours, dotted.rsplit(".", 1)[1]):
                return dotted
        expected = [_fields(to_raw(r)) for r in theirs.take()]
        got = [_fields(r) for r in ours.take()]
        if got != expected or ours.next_fetch_offset != theirs.next_fetch_offset:
            return f"{_READER} (reads a batch otherwise than kafka-python's reader)"
        if (ours.records_read, ours.bytes_read) != (theirs.records_read, theirs.bytes_read):
            return f"{_READER} (counts a batch otherwise than kafka-python's reader)"
    except Exception as exc:  # whatever the library changed, the library's reader stays
        return f"{_READER} ({type(exc).__name__}: {exc})"
    return None


def _owners() -> dict[str, Any]:
    return {
        "kafka.consumer.fetcher.Fetcher.PartitionRecords": _PartitionRecords,
        "kafka.record.default_records.DefaultRecordBatch": _DefaultRecordBatch,
    }


def _sample_batch() -> bytes:
    """A v2 batch of three records at offsets 0-2, built by the library's own builder."""
    module: Any = _default_records  # not None: checked before (_DefaultRecordBatch)
    builder = module.DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 16,
    )
    builder.append(0, timestamp=1_700_000_000_000, key=b"k0", value=b"v0", headers=[])
    builder.append(1, timestamp=1_700_000_000_001, key=None, value=b"v1", headers=[("h", b"x")])
    builder.append(2, timestamp=1_700_000_000_002, key=b"k2", value=None, headers=[])
    return bytes(builder.build())


def _memory_records(buffer: bytes) -> Any:
    return kafka.record.memory_records.MemoryRecords(bytes(buffer))


def _fields(record: RawMessage) -> tuple[Any, ...]:
    return (record.offset, record.key, record.value, record.headers, record.timestamp_ms)


def _records(
    self: Any, tp: Any, records: Any, key_deserializer: Any, value_deserializer: Any
) -> Iterator[RawMessage]:
    """``PartitionRecords._unpack_records`` of kafka-python 3.0.12, reading ``RawMessage``."""
    topic, partition = tp.topic, tp.partition
    check_crcs = self.check_crcs
    read_committed = self.isolation_level == _READ_COMMITTED
    try:
        batch = records.next_batch()
        last_batch = None
        while batch is not None:
            last_batch = batch
            if check_crcs and not batch.validate_crc():
                raise _CorruptRecordError(
                    f"Record batch for partition {tp} at offset {batch.base_offset} failed "
                    "crc check"
                )
            if batch.magic != 2:
                yield from _legacy(self, topic, partition, batch)
                batch = records.next_batch()
                continue
            self.leader_epoch = batch.leader_epoch
            if read_committed and batch.has_producer_id():
                self._consume_aborted_transactions_up_to(batch.last_offset)
                if self._contains_abort_marker(batch):
                    self.aborted_producer_ids.discard(batch.producer_id)
                elif self._is_batch_aborted(batch):
                    self.next_fetch_offset = batch.next_offset
                    batch = records.next_batch()
                    continue
            if batch.is_control_batch:
                self.next_fetch_offset = batch.next_offset
                batch = records.next_batch()
                continue
            yield from _batch(self, topic, partition, batch)
            batch = records.next_batch()
        # v2 keeps a batch's last offset even when compaction removed its last record: the
        # next fetch starts after the batch, not inside it again.
        if last_batch is not None and last_batch.magic == 2:
            self.next_fetch_offset = last_batch.next_offset
        self.drain()
    except StopIteration:  # a generator would end on it silently; an error, as the library's
        raise RuntimeError("StopIteration raised unpacking messageset") from None


def _legacy(self: Any, topic: str, partition: int, batch: Any) -> Iterator[RawMessage]:
    """A v0/v1 message set: the library's records, each CRC-checked as the library does."""
    for record in batch:
        if self.check_crcs and not record.validate_crc():
            raise _CorruptRecordError(
                f"Record for partition {topic}-{partition} at offset {record.offset} failed "
                "crc check"
            )
        self.records_read += 1
        self.bytes_read += record.size_in_bytes
        self.next_fetch_offset = record.offset + 1
        ts = record.timestamp
        yield RawMessage(
            topic,
            partition,
            record.offset,
            record.value,
            record.key,
            (),  # v0/v1 messages carry no headers
            ts if ts is not None and ts >= 0 else None,
        )


def _batch(self: Any, topic: str, partition: int, batch: Any) -> Iterator[RawMessage]:
    """The records of one v2 batch (``DefaultRecordBatch._read_msg``, inlined).

    Record => Length Attributes TimestampDelta OffsetDelta Key Value Headers, the integers
    zigzag varints: one byte holds -64..63 (the attributes, a key length of -1, header counts),
    two bytes -8192..8191 (record lengths, value sizes and deltas of all but huge records and
    batches); longer ones go to kafka-python's ``decode_varint``.
    """
    batch._maybe_uncompress()
    buffer = batch._buffer
    view = memoryview(buffer)  # a key or value copied once, not sliced then copied
    pos = batch._pos
    header = batch._header_data
    base_offset = header[_BASE_OFFSET]
    first_ts = header[_FIRST_TIMESTAMP]
    append_ts = header[_MAX_TIMESTAMP] if header[_ATTRIBUTES] & _LOG_APPEND_TIME else None
    varint: Any = _decode_varint  # not None: read_raw_records installs this reader only with it
    # The varint decode is written out at each field, not called: a call per varint is the
    # cost this reader exists to remove (bench/record_reader.py measures it).
    for _ in range(header[_RECORDS_COUNT]):
        try:
            b = buffer[pos]
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif (c := buffer[pos + 1]) < 0x80:
                b = (b & 0x7F) | c << 7
                length, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                length, pos = varint(buffer, pos)
            start = pos
            if buffer[pos] < 0x80:  # attributes: unused
                pos += 1
            else:
                _, pos = varint(buffer, pos)
            b = buffer[pos]
            if b < 0x80:
                ts_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif (c := buffer[pos + 1]) < 0x80:
                b = (b & 0x7F) | c << 7
                ts_delta, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                ts_delta, pos = varint(buffer, pos)
            b = buffer[pos]
            if b < 0x80:
                offset_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif (c := buffer[pos + 1]) < 0x80:
                b = (b & 0x7F) | c << 7
                offset_delta, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                offset_delta, pos = varint(buffer, pos)
            b = buffer[pos]
            if b < 0x80:
                size, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif (c := buffer[pos + 1]) < 0x80:
                b = (b & 0x7F) | c << 7
                size, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                size, pos = varint(buffer, pos)
            if size >= 0:
                key: bytes | None = bytes(view[pos : pos + size])
                pos += size
            else:
                key = None
            b = buffer[pos]
            if b < 0x80:
                size, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif (c := buffer[pos + 1]) < 0x80:
                b = (b & 0x7F) | c << 7
                size, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                size, pos = varint(buffer, pos)
            if size >= 0:
                value: bytes | None = bytes(view[pos : pos + size])
                pos += size
            else:
                value = None
            b = buffer[pos]
            if b < 0x80:
                count, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                count, pos = varint(buffer, pos)
            if count < 0:
                raise _CorruptRecordError(f"Found invalid number of record headers {count}")
            headers: tuple[tuple[str, bytes], ...] = ()
            if count:
                found = []
                for _ in range(count):
                    size, pos = varint(buffer, pos)
                    if size < 0:
                        raise _CorruptRecordError(f"Invalid negative header key size {size}")
                    name = buffer[pos : pos + size].decode("utf-8")
                    pos += size
                    size, pos = varint(buffer, pos)
                    if size >= 0:
                        found.append((name, bytes(view[pos : pos + size])))
                        pos += size
                    else:
                        found.append((name, b""))
                headers = tuple(found)
            if pos - start != length:
                raise _CorruptRecordError(
                    f"Invalid record size: expected to read {length} bytes in record payload, "
                    f"but instead read {pos - start}"
                )
        except (ValueError, IndexError) as err:  # as DefaultRecordBatch.__next__ words it
            raise _CorruptRecordError(f"Found invalid record structure: {err!r}") from None
        batch._pos = pos
        offset = base_offset + offset_delta
        ts = append_ts if append_ts is not None else first_ts + ts_delta
        self.records_read += 1
        self.bytes_read += length
        self.next_fetch_offset = offset + 1
        yield RawMessage(topic, partition, offset, value, key, headers, ts if ts >= 0 else None)
    if batch._pos != len(buffer):
        raise _CorruptRecordError(
            f"{len(buffer) - batch._pos} unconsumed bytes after all records consumed"
        )


if _PartitionRecords is not None and _DefaultRecordBatch is not None:

    class _RawRecords(_PartitionRecords):  # type: ignore[misc, valid-type]
        """kafka-python's per-partition reader, its records read by ``_records``."""

        _unpack_records = _records

    RawRecords: type | None = _RawRecords
else:
    RawRecords = None
