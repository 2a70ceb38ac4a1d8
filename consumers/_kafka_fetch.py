"""kafka-python's fetcher, reached into: a record batch it cannot read raised with its
partition and offset (at every read, not once), records parked while their partition was
paused handed out again once it is resumed, and what it fetched of a partition dropped.

The private attributes used here are listed in ``consumers._kafka.PRIVATE_ATTRIBUTES`` with the
others, and degrade the same way (a warning, then the library's own behaviour). The guard on
``take`` and the parked records' release are installed per consumer (``fail_unreadable_batches``,
``release_parked_records``, from the consumer's factory in ``group_consumer.py``): other
kafka-python consumers in the process keep the library's own.
"""

from __future__ import annotations

import importlib
import zlib
from typing import Any

from consumers._kafka import (
    _FETCHED_RECORDS,
    _NEXT_EXCEPTION,
    _NEXT_RECORDS,
    _PARKED_RECORDS,
    _PAUSED_FETCHES,
    _READER,
    _TAKE,
    UnreadableBatchError,
    _fallback,
    from_kafka_tp,
    kafka,
    to_kafka_tp,
)
from consumers.records import TopicPartition
from consumers.unreadable import CODEC_UNAVAILABLE, CORRUPT

__all__ = [
    "describe_unreadable",
    "discard_fetched",
    "fail_unreadable_batches",
    "release_parked_records",
]


def describe_unreadable(reason: str, cause: BaseException) -> str:
    """What failed, and what the operator can do about it."""
    detail = f"{type(cause).__name__}: {cause}"
    if reason == CODEC_UNAVAILABLE:
        return (
            f"{detail}; the producer compressed this batch with a codec whose library is not "
            "installed: install casewatch's dependencies python-snappy, lz4 and zstandard into "
            "the daemon's environment and restart it"
        )
    return (
        f"{detail}; the batch fails its checks or does not decompress: check the producer and "
        "the broker's log for this offset (rules/RUNBOOK.md, CasewatchUnreadableBatches)"
    )


def _codec_errors() -> tuple[type[BaseException], ...]:
    """What decompressing a batch raises on bad data (kafka-python lets the codecs' own errors
    through): gzip's (OSError and its BadGzipFile, zlib.error, EOFError on a truncated stream;
    ``take`` does no I/O, so an OSError there is the decoder's), lz4's (a RuntimeError, also
    kafka-python's own for a short lz4 frame), snappy's and zstandard's."""
    found: list[type[BaseException]] = [OSError, zlib.error, EOFError, RuntimeError]
    for module, name in (("snappy", "UncompressError"), ("zstandard", "ZstdError")):
        try:
            error = getattr(importlib.import_module(module), name, None)
        except ImportError:  # that codec is not installed: kafka-python says so itself
            continue
        if isinstance(error, type) and issubclass(error, BaseException):
            found.append(error)
    return tuple(found)


# A batch that cannot be read: the library's errors (a CRC mismatch, a record that does not
# parse, a codec not installed) and the codecs'. Anything else (an AttributeError from a
# renamed private, a TypeError) is casewatch's own reader failing, not the batch.
_UNREADABLE: tuple[type[BaseException], ...] = (kafka.errors.KafkaError, *_codec_errors())


def _unreadable_reason(exc: BaseException) -> str:
    return CODEC_UNAVAILABLE if isinstance(exc, kafka.errors.UnsupportedCodecError) else CORRUPT


def fail_unreadable_batches(consumer: Any) -> bool:
    """Make an unreadable batch fail loudly on ``consumer``, with its partition and offset,
    instead of spinning; False (and a warning, once) where the library's reader stays as it is.

    kafka-python 3.0.12 reads a fetched partition through a generator (``PartitionRecords``):
    when decompressing or checking a batch raises (a codec library missing, a CRC mismatch),
    ``poll()`` raises once, the generator is finished, and every later ``take()`` returns no
    records without draining, so ``Fetcher.fetched_records`` loops forever on it holding the
    polling thread (100 % CPU, every partition stopped, SIGTERM never acted on). Here the
    fetcher's reader class (the library's, or casewatch's record reader when installed first)
    gets a ``take`` that remembers the failure and raises it again at every call as an
    ``UnreadableBatchError`` naming partition and offset, until the source discards the
    records (``discard_fetched``) and pauses the partition.

    Only kafka-python's errors and the codecs' are the batch's fault. Any other exception
    raised by casewatch's record reader is the reader's: the reader is taken off this consumer
    (one warning), the partition's records are dropped without moving its position, and the
    library's reader fetches them again. Raised by the library's own reader, it is passed on
    unchanged.
    """
    fetcher: Any = getattr(consumer, "_fetcher", None)
    current = getattr(fetcher, "PartitionRecords", None)
    library = getattr(getattr(kafka.consumer.fetcher, "Fetcher", None), "PartitionRecords", None)
    if current is None or library is None or not hasattr(current, "take"):
        _fallback("fail_unreadable_batches", _TAKE if current is not None else _READER)
        return False
    if getattr(current, "fails_unreadable", False):
        return True
    plain = _guarded(library, None)

    def reader_failed(records: Any, exc: BaseException) -> None:
        _fallback("read_raw_records", f"{_READER} raised {type(exc).__name__}: {exc}")
        fetcher.PartitionRecords = plain

    fetcher.PartitionRecords = plain if current is library else _guarded(current, reader_failed)
    return True


def release_parked_records(consumer: Any) -> bool:
    """Hand out again, once its partition is resumed, what the fetcher parked of a partition
    paused while its records were being handed out; False (and a warning, once) where the
    library's own ``fetched_records`` stays.

    kafka-python 3.0.12 parks a paused partition's half-read records
    (``_paused_partition_records``) and, while they are parked, fetches nothing more for that
    partition. ``fetched_records`` brings them back only when its in-line slot
    (``_next_partition_records``) is None; but a partition's records fully handed out stay in
    that slot, empty and never None, until another partition's records replace them. With the
    other partitions read to their end, nothing replaces them: the resumed partition is
    neither handed out nor fetched again, and stalls where it was paused, lag and all, for
    good (a daemon's backpressure pauses every partition under load). Here an empty slot is
    cleared before each call, as the library itself treats it (empty records and None are
    read alike everywhere else), so the parked records come back at the next call.
    """
    fetcher: Any = getattr(consumer, "_fetcher", None)
    original = getattr(fetcher, "fetched_records", None)
    if original is None:
        _fallback("release_parked_records", _FETCHED_RECORDS)
        return False
    for name, attribute in (
        ("_next_partition_records", _NEXT_RECORDS),
        ("_paused_partition_records", _PARKED_RECORDS),
    ):
        if not hasattr(fetcher, name):
            _fallback("release_parked_records", attribute)
            return False
    if getattr(original, "releases_parked", False):
        return True

    def fetched_records(*args: Any, **kwargs: Any) -> Any:
        current = fetcher._next_partition_records
        if current is not None and not current:
            fetcher._next_partition_records = None
        return original(*args, **kwargs)

    fetched_records.releases_parked = True  # type: ignore[attr-defined]
    fetcher.fetched_records = fetched_records
    return True


def _guarded(base: Any, reader_failed: Any) -> type:
    """``base`` with the guarded ``take``; ``reader_failed`` None for the library's reader."""
    original = base.take

    def take(self: Any, n: Any = None) -> Any:
        failed = getattr(self, "_casewatch_unreadable", None)
        if failed is not None:
            raise failed
        try:
            return original(self, n)
        except _UNREADABLE as exc:
            tp = from_kafka_tp(self.topic_partition)
            reason = _unreadable_reason(exc)
            error = UnreadableBatchError(
                tp, int(self.next_fetch_offset), reason, exc, describe_unreadable(reason, exc)
            )
            self._casewatch_unreadable = error
            raise error from exc
        except Exception as exc:
            if reader_failed is None:
                raise
            reader_failed(self, exc)
            # No records: the fetcher keeps the position (the offset after the last record
            # handed out) and fetches from it again, read this time by the library's reader.
            self.drain()
            return []

    take.fails_unreadable = True  # type: ignore[attr-defined]
    return type(f"Guarded{base.__name__}", (base,), {"take": take, "fails_unreadable": True})


def discard_fetched(consumer: Any, tp: TopicPartition) -> None:
    """Drop what the fetcher holds of ``tp`` (parsed or parked), so that reading it again, once
    resumed, fetches it again from its position (which stayed on the unread batch).

    kafka-python 3.0.12 keeps a fetched partition in one of four places: the records being
    handed out (``_next_partition_records``), records parked while the partition is paused
    (``_paused_partition_records``), a completed fetch not parsed yet and parked likewise
    (``_paused_completed_fetches``), and a fetch error waiting to be raised
    (``_next_in_line_exception_metadata``). Whichever of them is missing is skipped with a
    warning: the partition is then read again from what is left (at worst the same failure,
    retried with backoff).
    """
    fetcher = getattr(consumer, "_fetcher", None)
    if fetcher is None or not hasattr(fetcher, "_paused_partition_records"):
        _fallback("discard_fetched", "KafkaConsumer._fetcher._paused_partition_records")
        return
    ktp = to_kafka_tp(tp)
    if hasattr(fetcher, "_next_partition_records"):
        current = fetcher._next_partition_records
        if current is not None and current.topic_partition == ktp:
            current.drain()
            fetcher._next_partition_records = None
    else:
        _fallback("discard_fetched.next_partition_records", _NEXT_RECORDS)
    parked = fetcher._paused_partition_records.pop(ktp, None)
    if parked is not None:
        parked.drain()
    if hasattr(fetcher, "_paused_completed_fetches"):
        fetcher._paused_completed_fetches.pop(ktp, None)
    else:
        _fallback("discard_fetched.paused_completed_fetches", _PAUSED_FETCHES)
    if hasattr(fetcher, "_next_in_line_exception_metadata"):
        pending = fetcher._next_in_line_exception_metadata
        if pending is not None and pending.partition == ktp:
            fetcher._next_in_line_exception_metadata = None
    else:
        _fallback("discard_fetched.next_in_line_exception", _NEXT_EXCEPTION)
