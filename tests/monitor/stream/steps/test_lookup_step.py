"""The look-up of stored verdicts before the judge: a replay never pays twice."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from prometheus_client import CollectorRegistry

from consumers.records import TopicPartition
from monitor.errors import MessageRejected, StorageError
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import Backoff, ManualClock
from monitor.sampling.budget import HourlyBudget, Reservation
from monitor.schema.turn import TurnEvent
from monitor.storage.store import Store
from monitor.stream.recorder import StreamRecorder
from monitor.stream.steps.base import Envelope
from monitor.stream.steps.lookup import LookupStep
from tests.fixtures.databases import make_turn, make_verdict
from tests.monitor.stream.steps.helpers import TP, CostLog, Recorder, env

HASH = "cfg-test"


def test_a_turn_already_judged_under_the_config_is_finished_without_a_judge_call(
    registry: CollectorRegistry, store: Store
) -> None:
    # The store holds "old" under this hash and "other" under another hash only.
    store.save(make_turn("old"), make_verdict(make_turn("old"), config_hash=HASH))
    store.save(make_turn("other"), make_verdict(make_turn("other"), config_hash="cfg-older"))
    judge, done, costs = Recorder(), Recorder(), CostLog()
    step = LookupStep(
        judge,
        done,
        store,
        HASH,
        StreamRecorder(Metrics(registry)),
        max_in_flight=8,
    )
    for offset, event_id in enumerate(["old", "new", "other"]):
        step.submit(env(make_turn(event_id), offset=offset, reservation=Reservation(costs, 2, 0.0)))
    assert judge.items == []  # nothing goes on before the batched look-up in poll
    step.poll()
    assert done.offsets == [0]  # finished, so its offset becomes committable
    assert [m.payload.event_id for m in judge.items] == ["new", "other"]  # "other": re-judged
    labels = {"assistant": "helpdesk", "reason": "already_judged"}
    assert registry.get_sample_value("casewatch_turns_skipped_total", labels) == 1
    # The sampler reserved the skipped turn's two requests up front; they all come back.
    assert (costs.reserved, costs.calls, costs.costs) == ([2], [0], [0.0])
    assert step.in_flight == 0 and step.healthy


class FlakyLookup:
    """A store look-up failing ``failures`` times, then finding nothing."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def existing(self, event_ids: Iterable[str], judge_config_hash: str) -> set[str]:
        self.calls += 1
        if self.calls <= self.failures:
            raise StorageError("database unreachable")
        return set()


def test_a_failing_look_up_holds_the_turns_and_retries_with_backoff(
    registry: CollectorRegistry,
) -> None:
    # Judging blind could pay twice; the turns wait (in flight, so intake pauses) instead.
    clock = ManualClock()
    lookup, judge = FlakyLookup(failures=1), Recorder()
    step = LookupStep(
        judge,
        Recorder(),
        lookup,
        HASH,
        StreamRecorder(Metrics(registry)),
        max_in_flight=2,
        clock=clock,
        backoff=Backoff(initial_s=1.0, max_s=1.0),
    )
    step.submit(env(make_turn("a"), offset=0))
    step.submit(env(make_turn("b"), offset=1))
    step.poll()
    assert lookup.calls == 1 and judge.items == [] and step.in_flight == 2
    assert not step.healthy
    with pytest.raises(MessageRejected):
        step.submit(env(make_turn("c"), offset=2))
    step.poll()
    assert lookup.calls == 1  # still backing off
    clock.advance(1.0)
    step.poll()
    assert lookup.calls == 2 and judge.offsets == [0, 1] and step.healthy


def test_turns_the_judge_refuses_stay_in_flight_until_it_takes_them(
    registry: CollectorRegistry, store: Store
) -> None:
    judge = Recorder(capacity=1)
    step = LookupStep(judge, Recorder(), store, HASH, StreamRecorder(Metrics(registry)), 4)
    step.submit(env(make_turn("a"), offset=0))
    step.submit(env(make_turn("b"), offset=1))
    step.poll()
    assert judge.offsets == [0] and step.in_flight == 1
    judge.capacity = 2
    step.poll()
    assert judge.offsets == [0, 1] and step.in_flight == 0


def test_held_turns_of_a_partition_that_comes_back_are_looked_up_again(
    registry: CollectorRegistry, store: Store
) -> None:
    # Revoked before the look-up; meanwhile the partition's other owner judged "a".
    judge, done = Recorder(), Recorder()
    step = LookupStep(judge, done, store, HASH, StreamRecorder(Metrics(registry)), 4)
    step.submit(env(make_turn("a"), offset=0))
    step.submit(env(make_turn("b"), offset=1))
    assert step.hold({TP}) == 2
    step.poll()
    assert judge.items == [] and done.items == []  # held: nothing starts
    store.save(make_turn("a"), make_verdict(make_turn("a"), config_hash=HASH))
    step.release({TP})
    step.poll()
    assert done.offsets == [0] and judge.offsets == [1]


def test_held_turns_of_a_lost_partition_are_dropped_and_discard_forgets_queued_ones(
    registry: CollectorRegistry, store: Store
) -> None:
    judge = Recorder()
    step = LookupStep(judge, Recorder(), store, HASH, StreamRecorder(Metrics(registry)), 4)
    step.submit(env(make_turn("a"), offset=0))
    step.hold({TP})
    step.release(set())  # the partition went to another consumer
    step.submit(env(make_turn("b"), offset=1))
    step.discard({TP})  # a rewind: re-read from the last commit
    step.poll()
    assert judge.items == [] and step.in_flight == 0
    assert step.running_in({TP}) == 0 and not step.wait_any(5.0)


def test_every_turn_dropped_here_gives_its_reservation_back(
    registry: CollectorRegistry, store: Store
) -> None:
    # A revoke whose partition went elsewhere, a rewind, the stop: each path drops queued
    # turns, and each must return what the sampler reserved for them, once.
    budget = HourlyBudget(10, None, 0.0, ManualClock())
    other = TopicPartition("turns", 1)
    judge = Recorder(capacity=0)  # the judge step is full: turns wait here

    def reserved(event_id: str, offset: int, tp: TopicPartition = TP) -> Envelope[TurnEvent]:
        reservation = budget.reservation(1)
        assert isinstance(reservation, Reservation)
        return env(make_turn(event_id), offset=offset, tp=tp, reservation=reservation)

    step = LookupStep(judge, Recorder(), store, HASH, StreamRecorder(Metrics(registry)), 8)
    step.submit(reserved("lost", 0))
    step.submit(reserved("kept", 0, other))
    step.hold({TP, other})
    step.release({other})  # TP went to another consumer
    assert budget.state()["calls"].reserved == 1  # "kept" is looked up again, still reserved
    step.submit(reserved("rewound", 1))
    step.poll()  # looked up, ready for the judge step, which refuses it
    step.discard({TP})  # a rewind: re-read from the last commit
    assert budget.state()["calls"].reserved == 1
    step.submit(reserved("abandoned", 2))
    step.close()  # the stop: what the drain did not finish
    assert budget.state()["calls"].reserved == 0
    assert budget.levels()["calls"] == 10 and budget.state()["calls"].spent == 0
    step.discard({TP, other})  # settled already: nothing given back twice
    assert budget.levels()["calls"] == 10
