"""The hourly judge budget's reservations (settled exactly once) and its state for the gauges."""

from __future__ import annotations

import threading

import pytest

from monitor.config.sampling import SamplingConfig
from monitor.runtime.clock import ManualClock
from monitor.sampling.budget import HourlyBudget, Reservation, UnitState
from monitor.sampling.sampler import Sampler
from tests.consumers.turns import turn


def test_a_reservation_settles_once_whoever_settles_it() -> None:
    budget = HourlyBudget(10, None, 0.0, ManualClock())
    reservation = budget.reservation(2)
    assert isinstance(reservation, Reservation) and reservation.open
    assert budget.levels()["calls"] == 8
    assert reservation.settle(3, 0.0)  # an arbiter's call: one more than reserved
    assert not reservation.open
    # A second settle, a release or a keep by another path changes nothing.
    assert not reservation.release() and not reservation.keep() and not reservation.settle(0, 0)
    assert budget.levels()["calls"] == 7
    assert budget.state()["calls"].reserved == 0


def test_release_gives_everything_back_and_keep_charges_the_estimate() -> None:
    budget = HourlyBudget(10, 1.0, 0.1, ManualClock())
    dropped, unknown = budget.reservation(2), budget.reservation(3)
    assert isinstance(dropped, Reservation) and isinstance(unknown, Reservation)
    assert budget.state()["calls"].reserved == 5
    assert budget.state()["usd"].reserved == pytest.approx(0.5)
    assert dropped.release()
    assert unknown.keep()  # spend unknown (an evaluator bug): charged as reserved
    assert budget.levels() == {"calls": pytest.approx(7), "usd": pytest.approx(0.7)}
    state = budget.state()
    assert (state["calls"].reserved, state["usd"].reserved) == (0, 0)
    assert state["calls"].spent == 3 and state["usd"].spent == pytest.approx(0.3)


def test_settles_racing_from_many_threads_count_once() -> None:
    budget = HourlyBudget(1000, None, 0.0, ManualClock())
    reservations = [budget.reservation(1) for _ in range(200)]
    assert all(isinstance(r, Reservation) for r in reservations)
    start = threading.Barrier(4)

    def settle_all() -> None:
        start.wait()
        for r in reservations:
            assert isinstance(r, Reservation)
            r.release()

    threads = [threading.Thread(target=settle_all) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert budget.levels()["calls"] == 1000  # given back once each, not four times
    assert budget.state()["calls"].reserved == 0


def test_a_refused_reservation_says_why_and_charges_nothing() -> None:
    budget = HourlyBudget(1, 0.05, 0.1, ManualClock())
    assert budget.reservation(1) == "budget_usd"  # the estimate is over the USD bucket
    assert budget.state()["calls"] == UnitState(1, 1, 0, 0)
    assert HourlyBudget(1, None, 0.0, ManualClock()).reservation(2) == "budget_calls"


def test_jobs_reserve_and_settle_count_in_the_state_too() -> None:
    budget = HourlyBudget(10, None, 0.0, ManualClock())
    assert budget.reserve(4) is None
    assert budget.state()["calls"].reserved == 4
    budget.settle(4, 2, 0.0)
    assert budget.state()["calls"] == UnitState(10, 8, 0, 2)


def test_spent_is_the_last_hour_by_the_minute_and_unlimited_units_have_no_limit() -> None:
    clock = ManualClock()
    budget = HourlyBudget(None, None, 0.0, clock)
    first = budget.reservation(1)
    assert isinstance(first, Reservation)
    first.settle(2, 0.25)
    clock.advance(30 * 60)
    second = budget.reservation(1)
    assert isinstance(second, Reservation)
    second.settle(1, 0.5)
    state = budget.state()
    assert state["calls"] == UnitState(None, None, 0, 3)
    assert state["usd"] == UnitState(None, None, 0, 0.75)
    clock.advance(31 * 60)  # the first spend is more than an hour old
    assert budget.state()["calls"].spent == 1
    clock.advance(10 * 3600)  # a long quiet spell: nothing left in the window
    assert budget.state()["calls"].spent == 0 and budget.state()["usd"].spent == 0


def test_a_budget_of_zero_refuses_every_sampled_turn() -> None:
    clock = ManualClock()
    for config, reason in (
        ({"budget_calls_per_hour": 0}, "budget_calls"),
        ({"budget_calls_per_hour": None, "budget_usd_per_hour": 0}, "budget_usd"),
    ):
        sampler = Sampler(SamplingConfig(default_rate=1.0, **config), clock)
        for i in range(3):
            decision = sampler.decide(turn(f"e{i}", conversation_id=f"c{i}"))
            assert (decision.sampled, decision.reason) == (False, reason)
            assert decision.reservation is None
        clock.advance(3600)  # a limit of 0 never refills
        assert sampler.decide(turn("late", conversation_id="late")).reason == reason
        assert sampler.budget.state()["calls"].reserved == 0
