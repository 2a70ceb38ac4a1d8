"""Pause state kept apart for the caller (backpressure) and unreadable-batch holds
(consumers/partition_pauses.py)."""

from __future__ import annotations

from consumers.partition_pauses import PartitionPauses
from consumers.records import TopicPartition

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


def test_a_held_partition_stays_paused_when_the_caller_resumes_it() -> None:
    pauses = PartitionPauses()
    assert pauses.pause({A, B}) == {A, B}
    assert pauses.resume({A, B}, held={A}) == {B}  # A waits for its retry
    assert pauses.by_caller == set()


def test_the_caller_sees_only_its_own_pauses() -> None:
    pauses = PartitionPauses()
    pauses.pause({B})
    # The consumer has both paused: A held on a batch, B by the caller.
    assert pauses.visible({A, B}, held={A}) == {B}
    pauses.pause({A})  # the caller pauses the held one too: now it is the caller's as well
    assert pauses.visible({A, B}, held={A}) == {A, B}


def test_a_retry_never_resumes_what_the_caller_paused() -> None:
    pauses = PartitionPauses()
    pauses.pause({A})
    assert pauses.to_retry({A, B}) == {B}
    pauses.forget({A})  # revoked
    assert pauses.to_retry({A, B}) == {A, B}
