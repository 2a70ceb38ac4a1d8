"""Bookkeeping of partitions held on an unreadable batch (consumers/unreadable.py)."""

from __future__ import annotations

import pytest

from consumers.records import TopicPartition
from consumers.unreadable import CODEC_UNAVAILABLE, CORRUPT, UnreadablePartitions
from monitor.runtime.clock import ManualClock

TP = TopicPartition("turns", 3)


def test_a_failed_read_holds_the_partition_until_its_retry_is_due() -> None:
    clock = ManualClock()
    stuck = UnreadablePartitions(clock, initial_s=1.0, max_s=4.0)
    batch = stuck.failed(TP, 120, CODEC_UNAVAILABLE, "no zstd")
    assert (batch.offset, batch.attempts, batch.reason) == (120, 1, CODEC_UNAVAILABLE)
    assert batch.describe() == "turns/3 at offset 120 (codec_unavailable, 1 attempt(s)): no zstd"
    assert stuck.held() == {TP}
    clock.advance(1.0)
    assert stuck.held() == set()  # due: the source resumes it and reads the batch again
    assert set(stuck.snapshot()) == {TP}  # still stuck until a record past it comes through


def test_backoff_doubles_per_failure_at_the_same_offset_up_to_the_cap() -> None:
    clock = ManualClock()
    stuck = UnreadablePartitions(clock, initial_s=1.0, max_s=4.0)
    waits = []
    for _ in range(5):
        batch = stuck.failed(TP, 7, CORRUPT, "crc")
        waits.append(batch.retry_at - clock.monotonic())
        clock.advance(waits[-1])
    assert waits == [1.0, 2.0, 4.0, 4.0, 4.0]
    assert stuck.failed(TP, 9, CORRUPT, "crc").attempts == 1  # a new offset starts over


def test_a_record_at_or_past_the_stuck_offset_releases_the_partition() -> None:
    stuck = UnreadablePartitions(ManualClock())
    stuck.failed(TP, 50, CORRUPT, "crc")
    assert stuck.read(TP, 49) is None
    released = stuck.read(TP, 50)
    assert released is not None and released.offset == 50
    assert not stuck and stuck.snapshot() == {}


def test_revoked_partitions_are_forgotten() -> None:
    stuck = UnreadablePartitions(ManualClock())
    other = TopicPartition("turns", 4)
    stuck.failed(TP, 1, CORRUPT, "crc")
    stuck.failed(other, 1, CORRUPT, "crc")
    stuck.forget([TP])
    assert set(stuck.snapshot()) == {other}


def test_misuse_fails_fast() -> None:
    with pytest.raises(ValueError, match="initial_s"):
        UnreadablePartitions(ManualClock(), initial_s=0)
    with pytest.raises(ValueError, match="reason"):
        UnreadablePartitions(ManualClock()).failed(TP, 1, "mystery", "x")
