"""A partition given back to the consumer that held it is read again from its last commit, or
from the first offset delivered when nothing was committed; partitions that went elsewhere
are forgotten; a rejoin forgets everything."""

from __future__ import annotations

from consumers.records import TopicPartition
from consumers.resume_points import ResumePoints

P0, P1, P2 = (TopicPartition("turns", p) for p in range(3))


def test_a_partition_given_back_resumes_at_its_last_commit() -> None:
    points = ResumePoints()
    points.delivered(P0, 0)
    points.delivered(P0, 50)  # a later batch: the first delivery is what counts
    points.committed({P0: 37})
    points.revoked({P0})
    points.committed({P0: 50})  # the commit made inside on_revoked, after the revocation
    assert points.assigned({P0, P1}) == {P0: 50}


def test_without_a_commit_it_resumes_at_the_first_offset_delivered() -> None:
    points = ResumePoints()
    points.delivered(P1, 12)
    points.revoked({P1})
    assert points.assigned({P1}) == {P1: 12}


def test_nothing_delivered_nothing_to_seek() -> None:
    points = ResumePoints()
    points.revoked({P2})
    assert points.assigned({P2}) == {}


def test_a_partition_not_revoked_keeps_its_position() -> None:
    points = ResumePoints()
    points.delivered(P0, 0)
    assert points.assigned({P0}) == {}  # an assignment without a revocation (the first join)


def test_a_partition_that_went_elsewhere_is_forgotten() -> None:
    points = ResumePoints()
    points.delivered(P0, 0)
    points.committed({P0: 40})
    points.revoked({P0, P1})
    assert points.assigned({P1}) == {}
    # Given to this consumer again later: kafka-python gives it fresh state, read from the
    # group's commit, so no seek of ours.
    points.revoked({P1})
    assert points.assigned({P0, P1}) == {}


def test_after_a_seek_the_point_stays_until_the_next_commit() -> None:
    points = ResumePoints()
    points.committed({P0: 50})
    points.revoked({P0})
    assert points.assigned({P0}) == {P0: 50}
    points.revoked({P0})
    assert points.assigned({P0}) == {P0: 50}


def test_a_partition_new_to_the_consumer_starts_without_an_old_point() -> None:
    points = ResumePoints()
    points.committed({P0: 10})  # a late commit of a partition already given away
    assert points.assigned({P0}) == {}  # assigned again later, not just revoked: fresh
    points.delivered(P0, 500)  # read from the group's commit, which moved on meanwhile
    points.revoked({P0})
    assert points.assigned({P0}) == {P0: 500}


def test_a_rejoin_forgets_every_point() -> None:
    points = ResumePoints()
    points.committed({P0: 50})
    points.revoked({P0})
    points.clear()
    assert points.assigned({P0}) == {}
