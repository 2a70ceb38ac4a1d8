from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from consumers.records import TopicPartition
from monitor.config.sampling import SamplingConfig
from monitor.errors import MessageRejected
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.sampling.budget import HourlyBudget, Reservation
from monitor.sampling.sampler import Sampler
from monitor.schema.turn import TurnEvent
from monitor.stream.recorder import StreamRecorder
from monitor.stream.steps.base import Envelope, JudgedTurn
from monitor.stream.steps.judge import JudgeStep
from tests.fixtures.databases import make_turn
from tests.monitor.stream.steps.helpers import TP, CostLog, GatedEvaluator, Recorder, env
from tests.support.waiting import wait_for


@pytest.fixture
def parts(
    registry: CollectorRegistry,
) -> Iterator[tuple[JudgeStep, Recorder, GatedEvaluator, CostLog]]:
    downstream = Recorder()
    evaluator = GatedEvaluator(open_gate=False)
    costs = CostLog()
    step = JudgeStep(
        downstream,
        evaluator,
        StreamRecorder(Metrics(registry)),
        concurrency=2,
        max_in_flight=3,
    )
    yield step, downstream, evaluator, costs
    evaluator.gate.set()
    step.close()


def test_verdicts_are_forwarded_with_their_offsets_and_recorded(
    parts: tuple[JudgeStep, Recorder, GatedEvaluator, CostLog], registry: CollectorRegistry
) -> None:
    step, downstream, evaluator, costs = parts
    evaluator.gate.set()
    for i in range(3):
        step.submit(env(make_turn(f"e{i}"), offset=i, reservation=Reservation(costs, 1, 0.0)))
    wait_for(lambda: len(downstream.items) == 3, tick=step.poll)
    assert sorted(downstream.offsets) == [0, 1, 2]
    judged = downstream.items[0].payload
    assert isinstance(judged, JudgedTurn)
    assert judged.verdict.event_id == judged.turn.event_id
    labels = {"assistant": "helpdesk", "band": "moderate"}
    assert registry.get_sample_value("casewatch_turns_judged_total", labels) == 3
    assert len(costs.costs) == 3 and all(c > 0 for c in costs.costs)
    assert step.in_flight == 0


def test_full_step_rejects_until_work_finishes(
    parts: tuple[JudgeStep, Recorder, GatedEvaluator, CostLog],
) -> None:
    step, downstream, evaluator, _ = parts
    for i in range(3):
        step.submit(env(make_turn(f"e{i}"), offset=i))
    with pytest.raises(MessageRejected):
        step.submit(env(make_turn("e3"), offset=3))
    assert step.in_flight == 3
    evaluator.gate.set()
    wait_for(lambda: step.in_flight == 0, tick=step.poll)
    step.submit(env(make_turn("e3"), offset=3))
    wait_for(lambda: len(downstream.items) == 4, tick=step.poll)


def test_results_refused_downstream_stay_held_and_count_in_flight(
    registry: CollectorRegistry,
) -> None:
    downstream = Recorder(capacity=1)
    step = JudgeStep(
        downstream,
        GatedEvaluator(),
        StreamRecorder(Metrics(registry)),
        concurrency=2,
        max_in_flight=2,
    )
    try:
        step.submit(env(make_turn("a"), offset=0))
        step.submit(env(make_turn("b"), offset=1))
        wait_for(lambda: len(downstream.items) == 1 and step.in_flight == 1, tick=step.poll)
        step.submit(env(make_turn("c"), offset=2))
        wait_for(lambda: step.in_flight == 2 and len(downstream.items) == 1, tick=step.poll)
        with pytest.raises(MessageRejected):
            step.submit(env(make_turn("d"), offset=3))
        downstream.capacity = None
        wait_for(lambda: step.in_flight == 0, tick=step.poll)
        assert sorted(downstream.offsets) == [0, 1, 2]
    finally:
        step.close()


def test_an_evaluator_that_raises_yields_a_judge_failed_verdict(
    registry: CollectorRegistry,
) -> None:
    downstream = Recorder()
    evaluator = GatedEvaluator(fail_for=frozenset({"bad"}))
    step = JudgeStep(
        downstream,
        evaluator,
        StreamRecorder(Metrics(registry)),
        concurrency=1,
        max_in_flight=4,
    )
    try:
        step.submit(env(make_turn("bad")))
        wait_for(lambda: len(downstream.items) == 1, tick=step.poll)
        verdict = downstream.items[0].payload.verdict
        assert (verdict.status, verdict.failure_reason) == ("judge_failed", "internal")
        assert verdict.judge_config_hash == "cfg-test"
        assert verdict.weight_profile == "default"  # the evaluator's, not a blank
        labels = {"assistant": "helpdesk", "band": "judge_failed"}
        assert registry.get_sample_value("casewatch_turns_judged_total", labels) == 1
    finally:
        step.close()


def test_join_waits_for_running_work_then_joins_downstream(
    parts: tuple[JudgeStep, Recorder, GatedEvaluator, CostLog],
) -> None:
    step, downstream, evaluator, _ = parts
    step.submit(env(make_turn("a")))
    evaluator.gate.set()
    step.join(timeout=10)
    assert downstream.offsets == [0]
    assert len(downstream.joins) == 1


def test_join_gives_up_at_the_deadline_leaving_work_unforwarded(
    parts: tuple[JudgeStep, Recorder, GatedEvaluator, CostLog],
) -> None:
    step, downstream, _, _ = parts
    step.submit(env(make_turn("a")))
    step.join(timeout=0.2)
    assert downstream.items == []
    assert step.in_flight == 1
    assert downstream.joins == [0.0]


def test_bad_sizes_fail_fast(registry: CollectorRegistry) -> None:
    with pytest.raises(ValueError, match="concurrency"):
        JudgeStep(Recorder(), GatedEvaluator(), StreamRecorder(Metrics(registry)), 0, 1)


def test_every_judge_request_of_a_turn_is_charged_to_the_hourly_budget(
    registry: CollectorRegistry,
) -> None:
    # The sampler reserves one request per primary up front; a panel's arbiter call and the
    # retries are only known once the verdict is in (make_verdict carries two judgments,
    # primary + arbiter, of 2 attempts each: four requests, all billed).
    clock = ManualClock()
    sampling = SamplingConfig(default_rate=1.0, budget_calls_per_hour=10)
    sampler = Sampler(sampling, clock, calls_per_turn=1)
    downstream = Recorder()
    step = JudgeStep(
        downstream,
        GatedEvaluator(),
        StreamRecorder(Metrics(registry)),
        1,
        4,
        clock=clock,
    )
    try:
        turn = make_turn("arbitrated")
        decision = sampler.decide(turn)
        assert decision.sampled
        assert sampler.budget.levels()["calls"] == 9
        step.submit(env(turn, reservation=decision.reservation))
        wait_for(lambda: len(downstream.items) == 1, tick=step.poll)
        judgments = downstream.items[0].payload.verdict.judgments
        assert [j.attempts for j in judgments] == [2, 2]
        assert sampler.budget.levels()["calls"] == 6
    finally:
        step.close()


def test_waiting_ends_when_a_call_finishes_and_turns_taken_back_are_not_collected(
    registry: CollectorRegistry,
) -> None:
    downstream = Recorder()
    evaluator = GatedEvaluator(open_gate=False)
    step = JudgeStep(
        downstream,
        evaluator,
        StreamRecorder(Metrics(registry)),
        concurrency=1,
        max_in_flight=4,
    )
    try:
        assert not step.wait_any(5.0)  # nothing in flight: at once
        step.submit(env(make_turn("a"), offset=0))
        step.submit(env(make_turn("b"), offset=1))
        wait_for(lambda: evaluator.calls == 1, tick=step.poll)  # "a" running, "b" queued behind it
        assert step.wait_any(0.05)  # a call in flight: True, though none finished
        assert evaluator.calls == 1
        assert step.hold({TP}) == 1
        step.poll()  # "b"'s future ended (cancelled) but the turn was taken back: not collected
        assert downstream.offsets == []
        # A wait far longer than the test's bound ends when "a" finishes, not at its timeout.
        waited: list[bool] = []
        waiter = threading.Thread(target=lambda: waited.append(step.wait_any(3600.0)))
        waiter.start()
        evaluator.gate.set()
        waiter.join(60.0)
        assert not waiter.is_alive() and waited == [True]
        step.poll()
        assert downstream.offsets == [0] and step.in_flight == 1  # "b", held
    finally:
        evaluator.gate.set()
        step.close()


def test_every_turn_dropped_or_abandoned_here_settles_its_reservation_once(
    registry: CollectorRegistry,
) -> None:
    clock = ManualClock()
    budget = HourlyBudget(20, None, 0.0, clock)
    other = TopicPartition("turns", 1)

    def reserved(event_id: str, offset: int, tp: TopicPartition = TP) -> Envelope[TurnEvent]:
        reservation = budget.reservation(1)
        assert isinstance(reservation, Reservation)
        return env(make_turn(event_id), offset=offset, tp=tp, reservation=reservation)

    downstream = Recorder()
    evaluator = GatedEvaluator(open_gate=False)
    step = JudgeStep(downstream, evaluator, StreamRecorder(Metrics(registry)), 1, 8, clock=clock)
    try:
        step.submit(reserved("running", 0, other))
        wait_for(lambda: evaluator.calls == 1, tick=step.poll)
        step.submit(reserved("lost", 1))
        step.submit(reserved("rewound", 2, other))
        step.submit(reserved("abandoned", 3, other))
        assert budget.state()["calls"].reserved == 4
        assert step.hold({TP}) == 1  # "lost" taken back; its partition goes elsewhere
        step.release({other})
        assert budget.state()["calls"].reserved == 3
        # A rewind drops the queued turns of its partition; "running" is under way.
        step.discard({TopicPartition("turns", 9)})  # not ours: nothing dropped
        assert budget.state()["calls"].reserved == 3
        step.hold({other})
        step.discard({other})
        assert budget.state()["calls"].reserved == 1  # only the call under way
        step.submit(reserved("queued at the stop", 4, other))
        step.close()  # the stop: the queued call is cancelled, the running one abandoned
        assert budget.state()["calls"].reserved == 1
        evaluator.gate.set()  # the abandoned call ends on its thread and settles there
        wait_for(lambda: budget.state()["calls"].reserved == 0, "the abandoned call's settle")
        # make_verdict's two judgments of two attempts each: four requests really made.
        assert budget.state()["calls"].spent == 4
        assert budget.levels()["calls"] == 16
        assert downstream.items == []  # nothing collected after the close
    finally:
        evaluator.gate.set()
        step.close()


def test_a_judge_call_finishing_after_close_writes_nothing_through(
    registry: CollectorRegistry,
) -> None:
    written: list[str] = []
    evaluator = GatedEvaluator(open_gate=False)
    step = JudgeStep(
        Recorder(),
        evaluator,
        StreamRecorder(Metrics(registry)),
        concurrency=1,
        max_in_flight=2,
        on_judged=lambda turn, _verdict: written.append(turn.event_id),
    )
    step.submit(env(make_turn("abandoned"), offset=0))
    wait_for(lambda: evaluator.calls == 1, "the judge call to start")
    step.close()
    evaluator.gate.set()  # the abandoned call ends after its owner closed the step
    wait_for(lambda: step.calls_running == 0, "the abandoned call to end")
    assert written == []
