"""tests/support/waiting.wait_for: what a test that waits relies on."""

from __future__ import annotations

import pytest

from tests.support.waiting import wait_for


def test_a_condition_that_holds_returns_at_once_and_tick_drives_the_rest() -> None:
    ticks: list[int] = []
    wait_for(lambda: len(ticks) == 3, "three ticks", tick=lambda: ticks.append(1), interval=0)
    assert ticks == [1, 1, 1]  # checked before each tick: none past the condition


def test_a_condition_that_never_holds_fails_naming_it_and_the_state_reached() -> None:
    with pytest.raises(AssertionError, match=r"waiting for the moon; got \['cheese'\]"):
        wait_for(lambda: False, "the moon", timeout=0, interval=0, explain=lambda: ["cheese"])


def test_a_bound_passed_where_the_description_goes_is_refused() -> None:
    with pytest.raises(TypeError, match="timeout="):
        wait_for(lambda: True, 60)  # type: ignore[arg-type]
