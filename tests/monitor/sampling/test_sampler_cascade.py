"""The sampler's cascade strategy: rules at probability 1, the draw by cell, the ledger."""

from __future__ import annotations

from typing import Any

import pytest

from monitor.config.sampling import AlwaysJudgeRule, SamplingConfig
from monitor.config.settings import Settings
from monitor.errors import ConfigError
from monitor.runtime.clock import ManualClock
from monitor.sampling.cascade import REFRESH_S
from monitor.sampling.sampler import CASCADE_REASON, Sampler, sample_point
from tests.consumers.turns import turn

CASCADE: dict[str, Any] = {
    "strategy": "cascade",
    "cascade_target_calls_per_hour": 100.0,
    "budget_calls_per_hour": None,
    "budget_usd_per_hour": None,
}


def _sampler(**config: Any) -> tuple[Sampler, ManualClock]:
    clock = ManualClock()
    return Sampler(SamplingConfig(**{**CASCADE, **config}), clock), clock


def test_uniform_stays_the_default_and_cascade_needs_a_target() -> None:
    assert SamplingConfig().strategy == "uniform"
    assert Sampler(SamplingConfig(), ManualClock()).cascade is None
    with pytest.raises(ValueError, match="cascade_target_calls_per_hour"):
        SamplingConfig(strategy="cascade", budget_calls_per_hour=None)
    assert SamplingConfig(strategy="cascade").cascade_target() == pytest.approx(900.0)
    with pytest.raises((ValueError, ConfigError)):
        Settings.model_validate({"sampling": {"strategy": "sometimes"}})


def test_a_turn_is_drawn_by_its_cell_probability_against_its_conversation_point() -> None:
    s, clock = _sampler()
    assert s.cascade is not None and s.draws is not None
    clock.advance(3600)
    for i in range(2000):  # a traffic of 2,000 turns an hour, all in one cell
        s.decide_cascade(turn(f"warm-{i}", conversation_id=f"w{i}"), "none")
    clock.advance(REFRESH_S)
    drawn = 0
    for i in range(4000):
        t = turn(f"e{i}", conversation_id=f"c{i}")
        d = s.decide_cascade(t, "none")
        assert d.inclusion is not None and d.cell == "none"
        assert d.sampled == (sample_point(t.conversation_id) < d.inclusion)
        assert d.inclusion >= 0.01  # the floor: never 0
        if d.sampled:
            drawn += 1
            assert d.reason == CASCADE_REASON
            assert s.draws.of(t.event_id) == (d.inclusion, "none")
        else:
            assert s.draws.of(t.event_id) is None
    assert 0 < drawn < 4000


def test_rules_are_judged_with_probability_one() -> None:
    rule = AlwaysJudgeRule(name="negative", field="feedback", equals="negative")
    s, _ = _sampler(always_judge=[rule], cascade_floor=0.01, cascade_target_calls_per_hour=0.0)
    d = s.decide_cascade(turn("e1", feedback={"rating": "negative"}), "none")
    assert (d.sampled, d.reason, d.inclusion) == (True, "rule:negative", 1.0)
    tripped = s.decide_cascade(turn("e2"), "none", rule="rule:identifier_tripwire")
    assert (tripped.sampled, tripped.inclusion) == (True, 1.0)


def test_a_turn_drawn_twice_keeps_its_first_probability() -> None:
    s, _ = _sampler()
    assert s.draws is not None and s.cascade is not None
    t = turn("e-twice", conversation_id="conv-low")  # any turn drawn at probability 1
    s.cascade.set_target(1e9)
    first = s.decide_cascade(t, "severe")
    assert first.sampled
    s.cascade.set_target(0.0)  # a rebalance later, a smaller budget: read again
    s.decide_cascade(t, "severe", rule="rule:identifier_tripwire")
    assert s.draws.of(t.event_id) == (first.inclusion, "severe")
    s.draws.stored(t.event_id, True)  # the row was written: the pair feeds the policy
    assert s.draws.of(t.event_id) is None
    assert s.cascade.pairs()["severe"].judged == 1


def test_the_budget_still_refuses_a_drawn_turn() -> None:
    s, _ = _sampler(budget_calls_per_hour=0.0, cascade_target_calls_per_hour=None)
    d = s.decide_cascade(turn("e1"), "severe", rule="rule:identifier_tripwire")
    assert (d.sampled, d.reason) == (False, "budget_calls")
    assert s.draws is not None and len(s.draws) == 0


def test_the_look_share_bounds_the_cheap_look_and_every_probability() -> None:
    s, clock = _sampler(cascade_look_share=0.25, cascade_target_calls_per_hour=1e9)
    looked = []

    def look(turn: Any) -> str:
        looked.append(turn.event_id)
        return "severe"

    clock.advance(3600)
    turns = [turn(f"e{i}", conversation_id=f"c{i}") for i in range(400)]
    inside = [t for t in turns if sample_point(t.conversation_id) < 0.25]
    for t in turns:
        if s.looks_at(t):
            d = s.decide_cascade(t, look(t))
            assert d.inclusion is not None and d.inclusion <= 0.25
    assert looked == [t.event_id for t in inside]
    assert s.cascade is not None
    # The looked-at quarter stands for all the traffic.
    assert s.cascade.traffic_per_hour()["severe"] == pytest.approx(len(inside) / 0.25)
    # A rule's turn is always looked at (and judged at probability 1).
    outside = next(t for t in turns if sample_point(t.conversation_id) >= 0.25)
    assert s.looks_at(outside, rule="rule:identifier_tripwire")
    with pytest.raises(ValueError, match="cascade_look_share"):
        SamplingConfig(**{**CASCADE, "cascade_floor": 0.5, "cascade_look_share": 0.2})
