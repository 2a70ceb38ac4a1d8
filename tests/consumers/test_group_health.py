"""Noticing a consumer group that does not form (consumers/group_health.py)."""

from __future__ import annotations

import random

import pytest

from consumers.group_health import MAX_BACKOFF, GroupFormation, LeaderTakeover, Rejoin
from monitor.runtime.clock import ManualClock


def _run(formation: GroupFormation, clock: ManualClock, states: str, step: float = 1.0) -> str:
    """Observe one state per ``step`` seconds ('F' formed, '.' not); 'R' marks a rejoin."""
    out = []
    for state in states:
        out.append("R" if formation.observe(state == "F") else state)
        clock.advance(step)
    return "".join(out)


class NoJitter(random.Random):
    def uniform(self, a: float, b: float) -> float:
        return a


def test_a_group_whose_sync_keeps_failing_is_rejoined_with_a_growing_bound() -> None:
    clock = ManualClock()
    formation = GroupFormation(clock, bound_s=5, settle_s=2, rng=NoJitter())
    # Not formed from t=0: past the bound (5 s) it rejoins at t=6; a rejoin that did not help
    # doubles the bound (10 s: t=17, then 20 s: t=38), so members of one group stop
    # interrupting each other's joins on a common rhythm.
    marks = _run(formation, clock, "." * 40)
    assert [i for i, c in enumerate(marks) if c == "R"] == [6, 17, 38]


def test_the_backoff_is_capped_jittered_and_reset_once_the_group_settles() -> None:
    clock = ManualClock()
    formation = GroupFormation(clock, bound_s=5, settle_s=2, rng=random.Random(1))
    _run(formation, clock, "." * 400)
    assert 5 * MAX_BACKOFF <= formation.bound_s <= 5 * MAX_BACKOFF * 1.5
    _run(formation, clock, "FFF")  # settled: the next stall starts from the base bound
    assert formation.bound_s == 5
    assert "R" in _run(formation, clock, "." * 7)


def test_a_group_that_forms_and_stays_formed_is_left_alone() -> None:
    clock = ManualClock()
    formation = GroupFormation(clock, bound_s=5, settle_s=2)
    # A normal join (4 s) then stable: never rejoined.
    assert "R" not in _run(formation, clock, "...." + "F" * 30)


def test_a_group_that_keeps_rebalancing_counts_as_not_formed() -> None:
    clock = ManualClock()
    formation = GroupFormation(clock, bound_s=5, settle_s=2)
    # Formed for one second in every four (Tansu forgetting a static member's id): it never
    # settles, so it is rejoined as if SyncGroup kept failing.
    assert "R" in _run(formation, clock, "...F" * 4)


def test_a_group_that_forms_past_the_bound_gets_its_chance_to_settle() -> None:
    clock = ManualClock()
    formation = GroupFormation(clock, bound_s=5, settle_s=2, rng=NoJitter())
    # Stuck for 6 s, past the bound (5 s), formed at t=6 (another member's recovery): not yet
    # settled, and not interrupted; settled at t=8, so nothing is rejoined.
    assert "R" not in _run(formation, clock, "." * 6 + "F" * 10)
    # Formed for a second only, then stuck again: the rejoin comes once it is not formed.
    marks = _run(formation, clock, "." * 3 + "F" + "." * 4)
    assert marks.index("R") > marks.index("F")


def test_bad_bounds_fail_fast() -> None:
    with pytest.raises(ValueError, match="bound_s"):
        GroupFormation(ManualClock(), bound_s=0, settle_s=1)


MEMBERS = {"casewatch-1-aa", "casewatch-0-bb", "r1-cc"}


def test_the_member_whose_id_sorts_first_takes_the_departed_leaders_place() -> None:
    assert LeaderTakeover().decide("casewatch-0-bb", "r0-gone", MEMBERS) is Rejoin.TAKE_OVER


def test_the_others_keep_their_ids_for_one_bound_then_rejoin_dynamically() -> None:
    takeover = LeaderTakeover()
    # Waiting keeps the choice where it is (a dynamic rejoin would change this member's id and
    # perhaps which id sorts first); the chosen one may be dead, so only for one bound.
    assert takeover.decide("r1-cc", "r0-gone", MEMBERS) is Rejoin.WAIT
    assert takeover.decide("r1-cc", "r0-gone", MEMBERS) is Rejoin.DYNAMIC
    assert takeover.decide("r1-cc", "r0-gone", MEMBERS) is Rejoin.WAIT  # a new stall


def test_a_leader_that_is_a_member_or_unknown_is_never_taken_over() -> None:
    takeover = LeaderTakeover()
    assert takeover.decide("casewatch-0-bb", "r1-cc", MEMBERS) is Rejoin.DYNAMIC  # a member
    assert takeover.decide("casewatch-0-bb", None, MEMBERS) is Rejoin.DYNAMIC  # not known
    assert takeover.decide("casewatch-0-bb", "r0-gone", set()) is Rejoin.DYNAMIC  # no answer
    # A member the coordinator does not list (already expired) has no say either.
    assert takeover.decide("a-expired", "r0-gone", MEMBERS) is Rejoin.DYNAMIC
