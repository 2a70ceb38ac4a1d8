"""Noticing a consumer group that does not form (consumers/group_health.py)."""

from __future__ import annotations

import pytest

from consumers.group_health import GroupFormation
from monitor.clock import ManualClock


def _run(formation: GroupFormation, clock: ManualClock, states: str, step: float = 1.0) -> str:
    """Observe one state per ``step`` seconds ('F' formed, '.' not); 'R' marks a rejoin."""
    out = []
    for state in states:
        out.append("R" if formation.observe(state == "F") else state)
        clock.advance(step)
    return "".join(out)


def test_a_group_whose_sync_keeps_failing_is_rejoined_after_the_bound() -> None:
    clock = ManualClock()
    formation = GroupFormation(clock, bound_s=5, settle_s=2)
    # Not formed from t=0: the sixth second past the bound rejoins, then the count restarts.
    assert _run(formation, clock, "." * 14) == "......R.....R."


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


def test_bad_bounds_fail_fast() -> None:
    with pytest.raises(ValueError, match="bound_s"):
        GroupFormation(ManualClock(), bound_s=0, settle_s=1)
