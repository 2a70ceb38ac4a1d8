"""LoopHandoff: a consumer call runs on a worker thread while the caller serves the callbacks
it triggers (consumers/rebalance_handoff.py). No broker: the "consumer call" here posts its
callbacks the way the Kafka source's listener does, from another thread."""

from __future__ import annotations

import threading

import pytest

from consumers.rebalance_handoff import LoopHandoff


def test_callbacks_posted_during_a_call_run_on_the_calling_thread() -> None:
    handoff = LoopHandoff()
    caller = threading.get_ident()
    ran_on: list[int] = []
    served = threading.Event()

    def consumer_call() -> str:
        # kafka-python's I/O thread would post this while the call waits for it.
        assert threading.get_ident() != caller
        assert handoff.post(lambda: (ran_on.append(threading.get_ident()), served.set()))
        assert served.wait(30), "the callback was never served"
        return "records"

    try:
        assert handoff.call(consumer_call) == "records"
    finally:
        handoff.close()
    assert ran_on == [caller]


def test_an_error_in_the_call_is_raised_to_the_caller() -> None:
    handoff = LoopHandoff()

    def failing() -> None:
        raise ValueError("broker gone")

    try:
        with pytest.raises(ValueError, match="broker gone"):
            handoff.call(failing)
        assert handoff.call(lambda: 7) == 7  # the worker goes on
    finally:
        handoff.close()


def test_with_no_call_waiting_a_post_is_refused() -> None:
    """The listener then runs the callback itself (an early join on a thread of its own)."""
    handoff = LoopHandoff()
    assert handoff.post(lambda: None) is False


def test_a_callback_posted_as_the_call_ends_is_still_served() -> None:
    handoff = LoopHandoff()
    served: list[str] = []

    def consumer_call() -> None:
        handoff.post(lambda: served.append("late"))  # not waited for: the call returns at once

    try:
        handoff.call(consumer_call)
    finally:
        handoff.close()
    assert served == ["late"]
