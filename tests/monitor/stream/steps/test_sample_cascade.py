"""The sample step under ``strategy: cascade``: the real cheap look (the offline judge) at every
turn, counted by cell, and the draw carrying its probability."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from monitor.config.sampling import SamplingConfig
from monitor.judging.heuristic.tripwire import identifier_tripwire
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.sampling.sampler import Sampler
from monitor.stream.recorder import StreamRecorder
from monitor.stream.steps.decisions import cheap_cell
from monitor.stream.steps.sample import SampleStep
from tests.fixtures.databases import make_turn
from tests.monitor.stream.steps.helpers import Recorder, env


def test_every_turn_gets_the_cheap_look_and_drawn_turns_carry_their_probability() -> None:
    registry = CollectorRegistry()
    nxt, done = Recorder(), Recorder()
    config = SamplingConfig(
        strategy="cascade",
        cascade_target_calls_per_hour=1e6,  # every turn drawn at probability 1
        budget_calls_per_hour=None,
        budget_usd_per_hour=None,
    )
    sampler = Sampler(config, ManualClock())
    step = SampleStep(
        nxt,
        done,
        sampler,
        StreamRecorder(Metrics(registry)),
        tripwire=identifier_tripwire,
        cascade=(sampler, cheap_cell),
    )
    turns = [make_turn(f"e{i}") for i in range(3)]
    for offset, turn in enumerate(turns):
        step.submit(env(turn, offset=offset))
    step.poll()
    assert nxt.offsets == [0, 1, 2]
    cell = cheap_cell(turns[0])
    looked = registry.get_sample_value(
        "casewatch_cheap_look_turns_total", {"assistant": "helpdesk", "cell": cell}
    )
    assert looked == 3
    assert sampler.draws is not None
    assert sampler.draws.of("e1") == (1.0, cell)
    sampled = {"assistant": "helpdesk", "reason": "cascade"}
    assert registry.get_sample_value("casewatch_turns_sampled_total", sampled) == 3


def test_a_turn_the_cascade_does_not_draw_is_finished_as_not_sampled() -> None:
    registry = CollectorRegistry()
    nxt, done = Recorder(), Recorder()
    config = SamplingConfig(
        strategy="cascade",
        cascade_target_calls_per_hour=0.0,
        cascade_floor=1e-9,  # the floor only: (almost) nothing drawn
        budget_calls_per_hour=None,
        budget_usd_per_hour=None,
    )
    sampler = Sampler(config, ManualClock())
    step = SampleStep(
        nxt, done, sampler, StreamRecorder(Metrics(registry)), cascade=(sampler, cheap_cell)
    )
    step.submit(env(make_turn("e1"), offset=7))
    step.poll()
    assert done.offsets == [7] and nxt.items == []
    skipped = {"assistant": "helpdesk", "reason": "not_sampled"}
    assert registry.get_sample_value("casewatch_turns_skipped_total", skipped) == 1
