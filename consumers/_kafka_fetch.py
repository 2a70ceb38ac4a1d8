"""kafka-python's fetcher, reached into: a record batch it cannot read raised with its
partition and offset (at every read, not once), and what it fetched of a partition dropped.

The private attributes used here are listed in ``consumers._kafka.PRIVATE_ATTRIBUTES`` with the
others, and degrade the same way (a warning, then the library's own behaviour). The patch is
applied at import; the Kafka source imports this module (through ``unreadable_holds.py``).
"""

from __future__ import annotations

from typing import Any

from consumers._kafka import (
    _NEXT_EXCEPTION,
    _NEXT_RECORDS,
    _PAUSED_FETCHES,
    _TAKE,
    UnreadableBatchError,
    _fallback,
    from_kafka_tp,
    kafka,
    to_kafka_tp,
)
from consumers.records import TopicPartition
from consumers.unreadable import CODEC_UNAVAILABLE, CORRUPT

__all__ = ["describe_unreadable", "discard_fetched"]


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


def _unreadable_reason(exc: BaseException) -> str:
    return CODEC_UNAVAILABLE if isinstance(exc, kafka.errors.UnsupportedCodecError) else CORRUPT


def _fail_unreadable_batches() -> None:
    """Make an unreadable batch fail loudly, with its partition and offset, instead of spinning.

    kafka-python 3.0.12 reads a fetched partition through a generator (``PartitionRecords``):
    when decompressing or checking a batch raises (a codec library missing, a CRC mismatch),
    ``poll()`` raises once, the generator is finished, and every later ``take()`` returns no
    records without draining, so ``Fetcher.fetched_records`` loops forever on it holding the
    polling thread (100 % CPU, every partition stopped, SIGTERM never acted on). Patched here:
    the failure is remembered and raised again at every ``take()`` as an
    ``UnreadableBatchError`` naming partition and offset, until the source discards the
    records (``discard_fetched``) and pauses the partition. Applied once, at import.
    """
    fetcher_cls = getattr(getattr(kafka.consumer, "fetcher", None), "Fetcher", None)
    cls = getattr(fetcher_cls, "PartitionRecords", None)
    original = getattr(cls, "take", None)
    if cls is None or original is None:
        _fallback("fail_unreadable_batches", _TAKE)
        return
    if getattr(original, "fails_unreadable", False):
        return

    def take(self: Any, n: Any = None) -> Any:
        failed = getattr(self, "_casewatch_unreadable", None)
        if failed is not None:
            raise failed
        try:
            return original(self, n)
        except Exception as exc:
            tp = from_kafka_tp(self.topic_partition)
            reason = _unreadable_reason(exc)
            error = UnreadableBatchError(
                tp, int(self.next_fetch_offset), reason, exc, describe_unreadable(reason, exc)
            )
            self._casewatch_unreadable = error
            raise error from exc

    take.fails_unreadable = True  # type: ignore[attr-defined]
    cls.take = take


_fail_unreadable_batches()


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
