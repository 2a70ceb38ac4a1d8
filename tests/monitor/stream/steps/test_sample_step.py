"""The sample step with the real Sampler."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from consumers.records import TopicPartition
from monitor.config.sampling import AlwaysJudgeRule, SamplingConfig
from monitor.errors import MessageRejected
from monitor.judging.heuristic.tripwire import identifier_tripwire
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.sampling.sampler import Sampler
from monitor.stream.recorder import StreamRecorder
from monitor.stream.steps.sample import SampleStep
from tests.fixtures.databases import make_turn
from tests.monitor.stream.steps.helpers import TP, Recorder, env


def test_skipped_turns_are_done_here_and_counted_by_reason() -> None:
    registry = CollectorRegistry()
    nxt, done = Recorder(), Recorder()
    sampler = Sampler(SamplingConfig(default_rate=0.0), ManualClock())
    step = SampleStep(nxt, done, sampler, StreamRecorder(Metrics(registry)))
    step.submit(env(make_turn("e1"), offset=4))
    assert done.offsets == [4]
    assert nxt.items == []
    labels = {"assistant": "helpdesk", "reason": "not_sampled"}
    assert registry.get_sample_value("casewatch_turns_skipped_total", labels) is None
    step.poll()  # counts are added once per poll
    assert registry.get_sample_value("casewatch_turns_skipped_total", labels) == 1


def test_sampled_turns_go_on_and_are_counted_by_reason() -> None:
    registry = CollectorRegistry()
    nxt, done = Recorder(), Recorder()
    rule = AlwaysJudgeRule(name="negative", field="feedback", equals="negative")
    sampler = Sampler(SamplingConfig(default_rate=1.0, always_judge=[rule]), ManualClock())
    step = SampleStep(nxt, done, sampler, StreamRecorder(Metrics(registry)))
    step.submit(env(make_turn("e1"), offset=0))
    step.submit(env(make_turn("e2", feedback={"rating": "negative"}), offset=1))
    assert nxt.offsets == [0, 1]
    assert done.items == []
    step.join(1.0)  # a join adds the counts too
    get = registry.get_sample_value
    assert get("casewatch_turns_sampled_total", {"assistant": "helpdesk", "reason": "rate"}) == 1
    labels = {"assistant": "helpdesk", "reason": "rule:negative"}
    assert get("casewatch_turns_sampled_total", labels) == 1


def test_a_rejected_turn_keeps_its_decision_and_budget() -> None:
    registry = CollectorRegistry()
    nxt = Recorder(capacity=0)
    sampler = Sampler(SamplingConfig(default_rate=1.0, budget_calls_per_hour=1), ManualClock())
    step = SampleStep(nxt, Recorder(), sampler, StreamRecorder(Metrics(registry)))
    message = env(make_turn("e1"))
    for _ in range(3):
        with pytest.raises(MessageRejected):
            step.submit(message)
    nxt.capacity = None
    step.submit(message)  # the one call of the hourly budget was charged once, not four times
    assert nxt.offsets == [0]
    step.poll()
    labels = {"assistant": "helpdesk", "reason": "rate"}
    assert registry.get_sample_value("casewatch_turns_sampled_total", labels) == 1
    step.submit(env(make_turn("e2"), offset=1))
    step.poll()
    labels = {"assistant": "helpdesk", "reason": "budget_calls"}
    assert registry.get_sample_value("casewatch_turns_skipped_total", labels) == 1


def test_poll_join_close_reach_the_next_step() -> None:
    nxt = Recorder()
    step = SampleStep(
        nxt,
        Recorder(),
        Sampler(SamplingConfig(default_rate=1.0), ManualClock()),
        StreamRecorder(Metrics(CollectorRegistry())),
    )
    step.poll()
    step.join(3.0)
    step.close()
    assert (nxt.polls, nxt.joins, nxt.closed) == (1, [3.0], True)


def test_counts_of_a_batch_are_added_per_assistant_and_reason() -> None:
    registry = CollectorRegistry()
    sampler = Sampler(SamplingConfig(default_rate=0.0, rates={"billing": 1.0}), ManualClock())
    step = SampleStep(Recorder(), Recorder(), sampler, StreamRecorder(Metrics(registry)))
    for i in range(5):
        step.submit(env(make_turn(f"h{i}"), offset=2 * i))
        step.submit(env(make_turn(f"b{i}", assistant="billing"), offset=2 * i + 1))
    step.poll()
    step.poll()  # nothing new: nothing added twice
    get = registry.get_sample_value
    assert (
        get("casewatch_turns_skipped_total", {"assistant": "helpdesk", "reason": "not_sampled"})
        == 5
    )
    assert get("casewatch_turns_sampled_total", {"assistant": "billing", "reason": "rate"}) == 5


# ---------------------------------------------------------------- the identifier tripwire

# The context cites KB-1042; the answer KB-1024 (two digits swapped).
CORRUPT: dict[str, Any] = {
    "contexts": [{"id": "kb-1", "text": "Reinstall the driver as KB-1042 describes."}],
    "answer": "Reinstall the driver as KB-1024 describes.",
}


def test_the_tripwire_checks_every_turn_and_a_hit_is_sampled_by_its_rule() -> None:
    registry = CollectorRegistry()
    nxt, done = Recorder(), Recorder()
    sampler = Sampler(SamplingConfig(default_rate=0.0), ManualClock())
    step = SampleStep(
        nxt, done, sampler, StreamRecorder(Metrics(registry)), tripwire=identifier_tripwire
    )
    step.submit(env(make_turn("clean"), offset=0))
    step.submit(env(make_turn("bad", **CORRUPT), offset=1))
    assert done.offsets == [0]
    assert nxt.offsets == [1]
    step.poll()
    get = registry.get_sample_value
    assert get("casewatch_tripwire_checked_total", {"assistant": "helpdesk"}) == 2
    assert (
        get("casewatch_identifier_mismatch_total", {"assistant": "helpdesk", "kind": "article"})
        == 1
    )
    labels = {"assistant": "helpdesk", "reason": "rule:identifier_tripwire"}
    assert get("casewatch_turns_sampled_total", labels) == 1
    step.poll()  # nothing new: nothing added twice
    assert get("casewatch_tripwire_checked_total", {"assistant": "helpdesk"}) == 2


def test_a_tripwire_hit_stays_within_the_budget() -> None:
    registry = CollectorRegistry()
    nxt, done = Recorder(), Recorder()
    sampler = Sampler(SamplingConfig(default_rate=0.0, budget_calls_per_hour=1), ManualClock())
    step = SampleStep(
        nxt, done, sampler, StreamRecorder(Metrics(registry)), tripwire=identifier_tripwire
    )
    step.submit(env(make_turn("b1", **CORRUPT), offset=0))
    step.submit(env(make_turn("b2", **CORRUPT), offset=1))
    assert nxt.offsets == [0]
    assert done.offsets == [1]
    step.poll()
    labels = {"assistant": "helpdesk", "reason": "budget_calls"}
    assert registry.get_sample_value("casewatch_turns_skipped_total", labels) == 1
    assert (
        registry.get_sample_value(
            "casewatch_identifier_mismatch_total", {"assistant": "helpdesk", "kind": "article"}
        )
        == 2
    )


def test_a_configured_rule_keeps_its_reason_when_the_tripwire_also_fires() -> None:
    registry = CollectorRegistry()
    rule = AlwaysJudgeRule(name="negative", field="feedback", equals="negative")
    sampler = Sampler(SamplingConfig(default_rate=0.0, always_judge=[rule]), ManualClock())
    step = SampleStep(
        Recorder(),
        Recorder(),
        sampler,
        StreamRecorder(Metrics(registry)),
        tripwire=identifier_tripwire,
    )
    step.submit(env(make_turn("b", feedback={"rating": "negative"}, **CORRUPT)))
    step.poll()
    labels = {"assistant": "helpdesk", "reason": "rule:negative"}
    assert registry.get_sample_value("casewatch_turns_sampled_total", labels) == 1


def test_without_a_tripwire_nothing_is_checked() -> None:
    registry = CollectorRegistry()
    sampler = Sampler(SamplingConfig(default_rate=0.0), ManualClock())
    step = SampleStep(Recorder(), Recorder(), sampler, StreamRecorder(Metrics(registry)))
    step.submit(env(make_turn("b", **CORRUPT)))
    step.poll()
    assert (
        registry.get_sample_value("casewatch_tripwire_checked_total", {"assistant": "helpdesk"})
        is None
    )


def test_a_turn_past_the_tripwire_bounds_is_counted_as_truncated() -> None:
    registry = CollectorRegistry()
    sampler = Sampler(SamplingConfig(default_rate=0.0), ManualClock())
    step = SampleStep(
        Recorder(),
        Recorder(),
        sampler,
        StreamRecorder(Metrics(registry)),
        tripwire=identifier_tripwire,
    )
    huge = "Reinstall the driver as KB-1042 describes. " + "Nothing else. " * 10_000
    step.submit(env(make_turn("small", **CORRUPT), offset=0))
    step.submit(env(make_turn("huge", contexts=CORRUPT["contexts"], answer=huge), offset=1))
    step.poll()
    get = registry.get_sample_value
    assert get("casewatch_tripwire_checked_total", {"assistant": "helpdesk"}) == 2
    assert get("casewatch_tripwire_truncated_total", {"assistant": "helpdesk"}) == 1


def test_a_kept_decision_whose_record_never_comes_back_gives_its_reservation_back() -> None:
    # The loop drops a rejected record when its partition is revoked or rewound, or at the
    # stop: the reservation made for it must not stay taken.
    sampler = Sampler(SamplingConfig(default_rate=1.0, budget_calls_per_hour=10), ManualClock())
    nxt = Recorder(capacity=0)
    step = SampleStep(nxt, Recorder(), sampler, StreamRecorder(Metrics(CollectorRegistry())))

    def reserved() -> float:
        return sampler.budget.state()["calls"].reserved

    with pytest.raises(MessageRejected):
        step.submit(env(make_turn("dropped"), offset=0))
    assert reserved() == 1
    with pytest.raises(MessageRejected):
        step.submit(env(make_turn("next"), offset=1))  # the loop moved on: "dropped" let go
    assert reserved() == 1
    step.discard({TopicPartition("turns", 7)})  # another partition: kept
    assert reserved() == 1
    step.discard({TP})  # a rewind of its partition
    assert reserved() == 0
    with pytest.raises(MessageRejected):
        step.submit(env(make_turn("at the stop"), offset=2))
    step.release({TP})  # still owned after a rebalance: kept for the next offer
    assert reserved() == 1
    step.close()
    assert reserved() == 0 and sampler.budget.levels()["calls"] == 10
    nxt.capacity = None
    step.submit(env(make_turn("accepted"), offset=3))
    envelope = nxt.items[0]
    assert envelope.reservation is not None and envelope.reservation.open
    assert reserved() == 1  # the turn's envelope carries it on


def test_a_budget_of_zero_skips_every_turn_counted_and_logged_once() -> None:
    registry = CollectorRegistry()
    clock = ManualClock()
    sampler = Sampler(SamplingConfig(default_rate=1.0, budget_calls_per_hour=0), clock)
    nxt, done = Recorder(), Recorder()
    step = SampleStep(nxt, done, sampler, StreamRecorder(Metrics(registry)))
    with capture_logs() as logs:
        for i in range(5):
            step.submit(env(make_turn(f"e{i}"), offset=i))
            clock.advance(600)
        step.poll()
    assert nxt.items == [] and done.offsets == [0, 1, 2, 3, 4]
    labels = {"assistant": "helpdesk", "reason": "budget_calls"}
    assert registry.get_sample_value("casewatch_turns_skipped_total", labels) == 5
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert len(warnings) == 1
    assert warnings[0]["reason"] == "budget_calls"
    assert warnings[0]["setting"] == "sampling.budget_calls_per_hour"


def test_a_budget_that_refills_is_logged_when_it_refuses_and_when_it_admits_again() -> None:
    clock = ManualClock()
    sampler = Sampler(SamplingConfig(default_rate=1.0, budget_calls_per_hour=1), clock)
    step = SampleStep(Recorder(), Recorder(), sampler, StreamRecorder(Metrics(CollectorRegistry())))
    with capture_logs() as logs:
        for i in range(4):
            step.submit(env(make_turn(f"e{i}"), offset=i))  # the first is judged
        clock.advance(3600)
        step.submit(env(make_turn("e4"), offset=4))
    events = [(e["log_level"], e.get("reason"), e.get("skipped")) for e in logs]
    assert events == [("warning", "budget_calls", None), ("info", None, 3)]
