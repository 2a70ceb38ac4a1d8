from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

import pytest
from prometheus_client import CollectorRegistry

from consumers.sampling import Sampler
from monitor.clock import Backoff, ManualClock
from monitor.errors import MessageRejected, StorageError
from monitor.exporter import Metrics
from monitor.settings import SamplingConfig
from monitor.storage.store import Store
from monitor.stream.steps.base import JudgedTurn
from monitor.stream.steps.judge import JudgeStep
from tests.fixtures.databases import make_turn, make_verdict
from tests.monitor.stream.steps.helpers import TP, CostLog, GatedEvaluator, Recorder, env


def _until(cond: Callable[[], bool], step: JudgeStep, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        step.poll()
        time.sleep(0.005)


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def parts(
    registry: CollectorRegistry,
) -> Iterator[tuple[JudgeStep, Recorder, GatedEvaluator, CostLog]]:
    downstream = Recorder()
    evaluator = GatedEvaluator(open_gate=False)
    costs = CostLog()
    step = JudgeStep(
        downstream, evaluator, Metrics(registry), costs, concurrency=2, max_in_flight=3
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
        step.submit(env(make_turn(f"e{i}"), offset=i))
    _until(lambda: len(downstream.items) == 3, step)
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
    _until(lambda: step.in_flight == 0, step)
    step.submit(env(make_turn("e3"), offset=3))
    _until(lambda: len(downstream.items) == 4, step)


def test_results_refused_downstream_stay_held_and_count_in_flight(
    registry: CollectorRegistry,
) -> None:
    downstream = Recorder(capacity=1)
    step = JudgeStep(
        downstream, GatedEvaluator(), Metrics(registry), CostLog(), concurrency=2, max_in_flight=2
    )
    try:
        step.submit(env(make_turn("a"), offset=0))
        step.submit(env(make_turn("b"), offset=1))
        _until(lambda: len(downstream.items) == 1 and step.in_flight == 1, step)
        step.submit(env(make_turn("c"), offset=2))
        _until(lambda: step.in_flight == 2 and len(downstream.items) == 1, step)
        with pytest.raises(MessageRejected):
            step.submit(env(make_turn("d"), offset=3))
        downstream.capacity = None
        _until(lambda: step.in_flight == 0, step)
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
        Metrics(registry),
        CostLog(),
        concurrency=1,
        max_in_flight=4,
    )
    try:
        step.submit(env(make_turn("bad")))
        _until(lambda: len(downstream.items) == 1, step)
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
        JudgeStep(Recorder(), GatedEvaluator(), Metrics(registry), CostLog(), 0, 1)


def test_every_judge_call_of_a_turn_is_charged_to_the_hourly_call_budget(
    registry: CollectorRegistry,
) -> None:
    # The sampler charges one call per primary up front; a panel's arbiter call is only known
    # once the verdict is in (make_verdict carries two judgments: primary + arbiter here).
    clock = ManualClock()
    sampling = SamplingConfig(default_rate=1.0, budget_calls_per_hour=10)
    sampler = Sampler(sampling, clock, calls_per_turn=1)
    downstream = Recorder()
    step = JudgeStep(downstream, GatedEvaluator(), Metrics(registry), sampler, 1, 4, clock=clock)
    try:
        turn = make_turn("arbitrated")
        assert sampler.decide(turn).sampled
        assert sampler.budget_levels()["calls"] == 9
        step.submit(env(turn))
        _until(lambda: len(downstream.items) == 1, step)
        assert len(downstream.items[0].payload.verdict.judgments) == 2
        assert sampler.budget_levels()["calls"] == 8
    finally:
        step.close()


# ---------------------------------------------------------------- replays: no second judge call


def test_a_turn_already_judged_under_the_config_is_finished_without_a_judge_call(
    registry: CollectorRegistry, store: Store
) -> None:
    # The store holds "old" under the evaluator's hash and "other" under another hash only.
    evaluator = GatedEvaluator()
    store.save(make_turn("old"), make_verdict(make_turn("old"), config_hash=evaluator.config_hash))
    store.save(make_turn("other"), make_verdict(make_turn("other"), config_hash="cfg-older"))
    downstream, done, costs = Recorder(), Recorder(), CostLog()
    step = JudgeStep(
        downstream,
        evaluator,
        Metrics(registry),
        costs,
        concurrency=2,
        max_in_flight=8,
        judged=store,
        done=done,
    )
    try:
        for offset, event_id in enumerate(["old", "new", "other"]):
            step.submit(env(make_turn(event_id), offset=offset))
        assert evaluator.calls == 0  # nothing starts before the batched look-up in poll
        _until(lambda: len(downstream.items) == 2, step)
        assert done.offsets == [0]  # finished, so its offset becomes committable
        assert sorted(m.payload.turn.event_id for m in downstream.items) == ["new", "other"]
        assert evaluator.calls == 2  # a changed judge configuration is judged again
        labels = {"assistant": "helpdesk", "reason": "already_judged"}
        assert registry.get_sample_value("casewatch_turns_skipped_total", labels) == 1
        # The sampler charged the skipped turn a call up front; it gets it back.
        assert (0.0, 0) in zip(costs.costs, costs.calls, strict=True)
        assert step.in_flight == 0
    finally:
        step.close()


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
    evaluator, lookup, downstream = GatedEvaluator(), FlakyLookup(failures=1), Recorder()
    step = JudgeStep(
        downstream,
        evaluator,
        Metrics(registry),
        CostLog(),
        concurrency=1,
        max_in_flight=2,
        clock=clock,
        judged=lookup,
        done=Recorder(),
        backoff=Backoff(initial_s=1.0, max_s=1.0),
    )
    try:
        step.submit(env(make_turn("a"), offset=0))
        step.submit(env(make_turn("b"), offset=1))
        step.poll()
        assert lookup.calls == 1 and evaluator.calls == 0 and step.in_flight == 2
        with pytest.raises(MessageRejected):
            step.submit(env(make_turn("c"), offset=2))
        step.poll()
        assert lookup.calls == 1  # still backing off
        clock.advance(1.0)
        _until(lambda: len(downstream.items) == 2, step)
        assert lookup.calls == 2 and evaluator.calls == 2
    finally:
        step.close()


def test_held_turns_of_a_partition_that_comes_back_are_looked_up_again(
    registry: CollectorRegistry, store: Store
) -> None:
    # Revoked before the look-up; meanwhile the partition's other owner judged "a".
    evaluator, downstream, done = GatedEvaluator(), Recorder(), Recorder()
    step = JudgeStep(
        downstream,
        evaluator,
        Metrics(registry),
        CostLog(),
        concurrency=1,
        max_in_flight=4,
        judged=store,
        done=done,
    )
    try:
        step.submit(env(make_turn("a"), offset=0))
        step.submit(env(make_turn("b"), offset=1))
        assert step.hold({TP}) == 2
        store.save(make_turn("a"), make_verdict(make_turn("a"), config_hash=evaluator.config_hash))
        step.release({TP})
        _until(lambda: len(downstream.items) == 1, step)
        assert done.offsets == [0] and downstream.offsets == [1]
        assert evaluator.calls == 1
    finally:
        step.close()


def test_judged_and_done_go_together(registry: CollectorRegistry, store: Store) -> None:
    with pytest.raises(ValueError, match="done"):
        JudgeStep(Recorder(), GatedEvaluator(), Metrics(registry), CostLog(), 1, 1, judged=store)


def test_waiting_ends_when_a_call_finishes_and_turns_taken_back_are_not_collected(
    registry: CollectorRegistry,
) -> None:
    downstream = Recorder()
    evaluator = GatedEvaluator(open_gate=False)
    step = JudgeStep(
        downstream, evaluator, Metrics(registry), CostLog(), concurrency=1, max_in_flight=4
    )
    try:
        assert not step.wait_any(5.0)  # nothing in flight: at once
        step.submit(env(make_turn("a"), offset=0))
        step.submit(env(make_turn("b"), offset=1))
        _until(lambda: evaluator.calls == 1, step)  # "a" running, "b" queued behind it
        started = time.monotonic()
        assert step.wait_any(0.05)
        assert time.monotonic() - started >= 0.04  # nothing finished: the whole timeout
        assert step.hold({TP}) == 1
        step.poll()  # "b"'s future ended (cancelled) but the turn was taken back: not collected
        assert downstream.offsets == []
        evaluator.gate.set()
        started = time.monotonic()
        assert step.wait_any(5.0)
        assert time.monotonic() - started < 2.0
        step.poll()
        assert downstream.offsets == [0] and step.in_flight == 1  # "b", held
    finally:
        evaluator.gate.set()
        step.close()
