from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consumers.offsets import OffsetTracker
from consumers.records import TopicPartition

A = TopicPartition("t", 0)
B = TopicPartition("t", 1)


def test_nothing_committable_until_something_finishes() -> None:
    tracker = OffsetTracker()
    for offset in (5, 6, 7):
        tracker.track(A, offset)
    assert tracker.committable() == {}
    assert tracker.pending_count() == 3


def test_out_of_order_completion_waits_for_the_oldest() -> None:
    tracker = OffsetTracker()
    for offset in range(4):
        tracker.track(A, offset)
    tracker.done(A, 2)
    tracker.done(A, 1)
    assert tracker.committable() == {}  # 0 is still in flight
    tracker.done(A, 0)
    assert tracker.committable() == {A: 3}
    tracker.done(A, 3)
    assert tracker.committable() == {A: 4}
    assert tracker.pending_count() == 0


def test_only_partitions_that_advanced_since_the_last_commit() -> None:
    tracker = OffsetTracker()
    tracker.track(A, 0)
    tracker.track(B, 10)
    tracker.track(B, 11)
    tracker.done(A, 0)
    tracker.done(B, 10)
    offsets = tracker.committable()
    assert offsets == {A: 1, B: 11}
    tracker.mark_committed(offsets)
    assert tracker.committable() == {}
    tracker.done(B, 11)
    assert tracker.committable() == {B: 12}


def test_an_unacknowledged_commit_is_offered_again() -> None:
    tracker = OffsetTracker()
    tracker.track(A, 0)
    tracker.done(A, 0)
    assert tracker.committable() == {A: 1}
    # commit failed: mark_committed never called
    assert tracker.committable() == {A: 1}


def test_gaps_in_offsets_are_fine() -> None:
    tracker = OffsetTracker()
    for offset in (3, 7, 8):
        tracker.track(A, offset)
    tracker.done(A, 3)
    assert tracker.committable() == {A: 7}
    tracker.done(A, 8)
    tracker.done(A, 7)
    assert tracker.committable() == {A: 9}


def test_revoke_drops_state_and_late_completions_are_ignored() -> None:
    tracker = OffsetTracker()
    tracker.track(A, 0)
    tracker.track(B, 0)
    tracker.revoke([A])
    assert tracker.pending_count() == 1
    assert tracker.done(A, 0) is False
    assert tracker.committable() == {}
    assert tracker.partitions() == {B}


def test_done_twice_or_untracked_is_reported() -> None:
    tracker = OffsetTracker()
    tracker.track(A, 0)
    tracker.track(A, 2)
    assert tracker.done(A, 1) is False  # never tracked
    assert tracker.done(A, 0) is True
    assert tracker.done(A, 0) is False
    assert tracker.pending_count() == 1


def test_offsets_must_increase() -> None:
    tracker = OffsetTracker()
    tracker.track(A, 5)
    with pytest.raises(ValueError, match="increasing order"):
        tracker.track(A, 5)


def test_retracking_after_revoke_starts_fresh() -> None:
    tracker = OffsetTracker()
    tracker.track(A, 5)
    tracker.revoke([A])
    tracker.track(A, 3)  # re-assigned later, re-read from the last commit
    tracker.done(A, 3)
    assert tracker.committable() == {A: 4}


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    gaps = draw(st.lists(st.integers(1, 3), min_size=1, max_size=40))
    offsets: list[int] = []
    current = draw(st.integers(0, 100))
    for gap in gaps:
        offsets.append(current)
        current += gap
    finished = draw(st.permutations(offsets))
    n_done = draw(st.integers(0, len(offsets)))
    return offsets, list(finished[:n_done])


@given(scenarios(), st.data())
def test_committable_never_passes_an_unfinished_offset(
    scenario: tuple[list[int], list[int]], data: st.DataObject
) -> None:
    offsets, completion_order = scenario
    tracker = OffsetTracker()
    for offset in offsets:
        tracker.track(A, offset)
    finished: set[int] = set()
    last_seen = marked = offsets[0]
    for offset in completion_order:
        tracker.done(A, offset)
        finished.add(offset)
        committable = tracker.committable()
        if A in committable:
            c = committable[A]
            # Everything tracked below the commit point is finished ...
            assert all(o in finished for o in offsets if o < c)
            # ... the commit point is as far as it can go ...
            unfinished = [o for o in offsets if o not in finished]
            assert c == (min(unfinished) if unfinished else max(finished) + 1)
            # ... it never moves back, and it is offered only past the last commit.
            assert c >= last_seen
            assert c > marked
            last_seen = c
            if data.draw(st.booleans()):
                tracker.mark_committed(committable)
                marked = c
    assert tracker.pending_count() == len(offsets) - len(finished)


def test_next_offset_is_one_past_the_last_tracked_and_forgotten_with_the_partition() -> None:
    tracker = OffsetTracker()
    tp = TopicPartition("t", 0)
    assert tracker.next_offset(tp) == -1
    tracker.track(tp, 4)
    tracker.track(tp, 9)  # gaps are fine
    assert tracker.next_offset(tp) == 10
    tracker.revoke([tp])
    assert tracker.next_offset(tp) == -1
