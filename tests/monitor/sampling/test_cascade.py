"""The cascade's online state: traffic per cell, pairs, the target and a budget change."""

from __future__ import annotations

import pytest

from monitor.runtime.clock import ManualClock
from monitor.sampling.cascade import REFRESH_S, CascadePolicy

CELLS = ("severe", "moderate", "minor", "none")


def _feed(policy: CascadePolicy, clock: ManualClock, per_cell: dict[str, int]) -> None:
    for cell, n in per_cell.items():
        for _ in range(n):
            policy.probability(cell)
    clock.advance(REFRESH_S)


def test_without_pairs_every_cell_draws_alike_and_meets_the_target() -> None:
    clock = ManualClock()
    policy = CascadePolicy(CELLS, 600.0, clock, floor=0.01)
    clock.advance(3600)
    _feed(policy, clock, {"severe": 100, "moderate": 300, "minor": 600, "none": 1000})
    pis = {c: policy.probability(c) for c in CELLS}
    assert len({round(p, 9) for p in pis.values()}) == 1  # no pairs: the uniform draw
    traffic = policy.traffic_per_hour()
    assert sum(traffic[c] * pis[c] for c in CELLS) == pytest.approx(600.0, rel=0.01)


def test_pairs_move_the_draw_to_where_the_cheap_look_errs() -> None:
    clock = ManualClock()
    policy = CascadePolicy(CELLS, 200.0, clock, floor=0.01)
    for _ in range(200):
        policy.observe("severe", True)
        policy.observe("none", False)
    clock.advance(3600)
    _feed(policy, clock, {"severe": 100, "moderate": 300, "minor": 600, "none": 1000})
    assert policy.probability("severe") > 5 * policy.probability("none")
    assert policy.probability("none") >= 0.01  # the floor: never 0


def test_a_budget_change_mid_hour_is_taken_at_the_next_draw() -> None:
    clock = ManualClock()
    policy = CascadePolicy(CELLS, 1000.0, clock)
    clock.advance(1800)
    _feed(policy, clock, dict.fromkeys(CELLS, 500))
    before = policy.probability("none")
    policy.set_target(250.0)  # mid-hour, no wait for the refresh interval
    after = policy.probability("none")
    assert after == pytest.approx(before / 4, rel=0.01)
    with pytest.raises(ValueError):
        policy.set_target(-1.0)


def test_an_unknown_cell_and_bad_settings_are_refused() -> None:
    clock = ManualClock()
    policy = CascadePolicy(CELLS, 10.0, clock)
    with pytest.raises(ValueError, match="unknown cheap-look cell"):
        policy.probability("catastrophic")
    with pytest.raises(ValueError, match="floor"):
        CascadePolicy(CELLS, 10.0, clock, floor=0.0)
    with pytest.raises(ValueError, match="cell"):
        CascadePolicy((), 10.0, clock)


def test_traffic_older_than_an_hour_is_forgotten() -> None:
    clock = ManualClock()
    policy = CascadePolicy(CELLS, 10.0, clock)
    _feed(policy, clock, {"none": 60})
    clock.advance(2 * 3600)
    assert policy.traffic_per_hour()["none"] == 0.0


def test_a_start_up_burst_is_not_drawn_at_its_first_turns_probability() -> None:
    clock = ManualClock()
    policy = CascadePolicy(CELLS, 100.0, clock)
    first = policy.probability("none")  # one turn seen: the target covers it
    for _ in range(500):  # the same second: no time has passed
        last = policy.probability("none")
    assert first == 1.0
    assert last < 0.5  # recomputed every REFRESH_TURNS turns from the traffic seen
