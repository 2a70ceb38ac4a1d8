from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.config.sampling import AlwaysJudgeRule, SamplingConfig
from monitor.errors import ConfigError
from monitor.runtime.clock import ManualClock
from monitor.sampling.sampler import SKIP_REASONS, SampleDecision, Sampler, sample_point
from tests.consumers.turns import turn

# Everything sampled, no budget, unless a test says otherwise (the shipped defaults are a
# tenth and an hourly budget: tests/monitor/config/test_settings.py).
OPEN: dict[str, Any] = {
    "default_rate": 1.0,
    "budget_calls_per_hour": None,
    "budget_usd_per_hour": None,
}


def sampler(clock: ManualClock | None = None, **config: Any) -> Sampler:
    return Sampler(SamplingConfig(**{**OPEN, **config}), clock or ManualClock())


def decide(s: Sampler, conversation: str = "conv-1", **overrides: Any) -> SampleDecision:
    return s.decide(turn(f"e-{conversation}", conversation_id=conversation, **overrides))


def test_sample_point_is_stable_sha256() -> None:
    # Pinned: a change here silently re-samples every running deployment.
    assert sample_point("conv-1") == pytest.approx(0.2121934800, abs=1e-9)
    digest = hashlib.sha256(b"conv-7").hexdigest()
    assert sample_point("conv-7") == int(digest[:16], 16) / 2**64
    assert 0.0 <= sample_point("") < 1.0


def test_rate_one_samples_everything_and_zero_nothing() -> None:
    everything, nothing = sampler(default_rate=1.0), sampler(default_rate=0.0)
    for i in range(50):
        assert decide(everything, f"c{i}") == SampleDecision(True, "rate")
        assert decide(nothing, f"c{i}") == SampleDecision(False, "not_sampled")


@given(
    conversation=st.text(alphabet="abcdefgh-0123456789", min_size=1, max_size=40),
    rate=st.one_of(st.sampled_from([0.0, 1.0]), st.floats(min_value=0.0, max_value=1.0)),
)
def test_the_decision_is_the_hash_point_against_the_rate(conversation: str, rate: float) -> None:
    # decide() skips the hash at rates 0 and 1; the outcome must be what the hash would give.
    expected = sample_point(conversation) < rate
    assert decide(sampler(default_rate=rate), conversation).sampled is expected


def test_sampling_is_deterministic_and_keeps_conversations_whole() -> None:
    a, b = sampler(default_rate=0.5), sampler(default_rate=0.5)
    conversations = [f"conv-{i}" for i in range(200)]
    for conv in conversations:
        decisions = {
            s.decide(turn(f"{conv}-t{i}", conversation_id=conv, turn_index=i)).sampled
            for s in (a, b)
            for i in range(3)
        }
        assert len(decisions) == 1, conv  # every turn, both samplers: one answer
    sampled = sum(decide(a, conv).sampled for conv in conversations)
    assert 70 < sampled < 130  # about half; sha256 is uniform enough for this


def test_per_assistant_rate_overrides_default() -> None:
    s = sampler(default_rate=0.0, rates={"billing": 1.0})
    assert decide(s, assistant="billing").sampled
    assert not decide(s, assistant="helpdesk").sampled
    assert s.rate_for("billing") == 1.0 and s.rate_for("other") == 0.0


@pytest.mark.parametrize(
    ("rule", "overrides"),
    [
        (AlwaysJudgeRule(name="err", field="answer", pattern=r"ERR-\d{3}"), {"answer": "ERR-504"}),
        (AlwaysJudgeRule(name="refund", field="query", equals="refund"), {"query": "refund"}),
        (
            AlwaysJudgeRule(name="unhappy", field="feedback", equals="negative"),
            {"feedback": {"rating": "negative", "comment": "useless"}},
        ),
        (
            AlwaysJudgeRule(name="vip", field="labels.tier", equals="gold"),
            {"labels": {"tier": "gold"}},
        ),
        (
            AlwaysJudgeRule(name="eu", field="labels.region", pattern=r"^eu-"),
            {"labels": {"region": "eu-west-1"}},
        ),
    ],
)
def test_always_judge_rules_override_the_rate(
    rule: AlwaysJudgeRule, overrides: dict[str, Any]
) -> None:
    s = sampler(default_rate=0.0, always_judge=[rule])
    assert decide(s, **overrides) == SampleDecision(True, f"rule:{rule.name}")
    assert decide(s) == SampleDecision(False, "not_sampled")  # the rule does not match


def test_rule_does_not_match_missing_fields() -> None:
    s = sampler(
        default_rate=0.0,
        always_judge=[
            AlwaysJudgeRule(name="unhappy", field="feedback", equals="negative"),
            AlwaysJudgeRule(name="vip", field="labels.tier", pattern="."),
        ],
    )
    assert not decide(s, feedback={"rating": "positive"}).sampled
    assert not decide(s, labels={"other": "x"}).sampled


def test_first_matching_rule_names_the_reason() -> None:
    rules = [
        AlwaysJudgeRule(name="first", field="answer", pattern="keepalive"),
        AlwaysJudgeRule(name="second", field="answer", pattern="30 s"),
    ]
    assert decide(sampler(default_rate=0.0, always_judge=rules)).reason == "rule:first"


def test_pattern_and_equals_together_must_both_match() -> None:
    rule = AlwaysJudgeRule(name="both", field="query", pattern="^re", equals="refund")
    s = sampler(default_rate=0.0, always_judge=[rule])
    assert decide(s, query="refund").sampled
    assert not decide(s, query="return").sampled


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (AlwaysJudgeRule(name="x", field="contexts", equals="a"), "unknown field"),
        (AlwaysJudgeRule(name="x", field="labels.", equals="a"), "needs a key"),
        (AlwaysJudgeRule(name="x", field="query"), "set 'pattern' or 'equals'"),
        (AlwaysJudgeRule(name="x", field="query", pattern="("), "bad pattern"),
    ],
)
def test_bad_rules_fail_at_start(rule: AlwaysJudgeRule, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        sampler(always_judge=[rule])


def test_call_budget_exhausts_and_refills_continuously() -> None:
    clock = ManualClock()
    s = sampler(clock, budget_calls_per_hour=3)
    assert [decide(s, f"c{i}").reason for i in range(4)] == [
        "rate",
        "rate",
        "rate",
        "budget_calls",
    ]
    clock.advance(600)  # 3 per hour → half a call in 10 minutes: not enough yet
    assert decide(s).reason == "budget_calls"
    clock.advance(700)  # > 20 minutes since exhaustion: one call back
    assert decide(s).reason == "rate"
    assert decide(s).reason == "budget_calls"
    clock.advance(10 * 3600)  # refill is capped at one hour's budget
    assert sum(decide(s, f"d{i}").sampled for i in range(10)) == 3


def test_budget_applies_to_always_judge_turns() -> None:
    rule = AlwaysJudgeRule(name="err", field="answer", pattern="ERR")
    s = sampler(default_rate=0.0, always_judge=[rule], budget_calls_per_hour=1)
    assert decide(s, answer="ERR 1").reason == "rule:err"
    assert decide(s, answer="ERR 2") == SampleDecision(False, "budget_calls")


def test_usd_budget_is_charged_up_front_and_corrected_by_actual_cost() -> None:
    clock = ManualClock()
    s = sampler(clock, budget_usd_per_hour=1.0, estimated_usd_per_call=0.25)
    assert all(decide(s, f"c{i}").sampled for i in range(4))
    assert decide(s) == SampleDecision(False, "budget_usd")
    # The four turns actually cost 0.10 each: 4 × 0.15 comes back.
    for _ in range(4):
        s.budget.settle(1, 1, 0.10)
    assert s.budget.levels()["usd"] == pytest.approx(0.60)
    assert [decide(s, f"d{i}").sampled for i in range(3)] == [True, True, False]


def test_costlier_than_estimated_turns_put_the_usd_bucket_in_debt() -> None:
    clock = ManualClock()
    s = sampler(clock, budget_usd_per_hour=1.0, estimated_usd_per_call=0.0)
    assert decide(s).sampled  # estimate 0: admitted while the bucket is positive
    s.budget.settle(1, 1, 1.5)
    assert decide(s).reason == "budget_usd"
    clock.advance(1800)  # refills 0.5: back to exactly zero, still nothing to spend
    assert decide(s).reason == "budget_usd"
    clock.advance(36)
    assert decide(s).sampled


def test_skipped_turns_are_not_charged() -> None:
    s = sampler(default_rate=0.0, budget_calls_per_hour=1, budget_usd_per_hour=1.0)
    for i in range(5):
        assert decide(s, f"c{i}").reason == "not_sampled"
    assert s.budget.levels() == {"calls": 1.0, "usd": 1.0}


def test_calls_per_turn_and_actual_calls() -> None:
    s = Sampler(
        SamplingConfig(**{**OPEN, "budget_calls_per_hour": 5}), ManualClock(), calls_per_turn=2
    )
    assert decide(s, "a").sampled and decide(s, "b").sampled
    assert decide(s, "c").reason == "budget_calls"  # 1 left, a turn needs 2
    s.budget.settle(2, 3, 0.0)  # turn "a" needed an arbiter: one more call charged
    assert s.budget.levels()["calls"] == pytest.approx(0.0)


def test_call_budget_checked_before_usd_and_usd_not_charged_on_refusal() -> None:
    s = sampler(budget_calls_per_hour=1, budget_usd_per_hour=1.0, estimated_usd_per_call=0.5)
    assert decide(s, "a").sampled
    assert decide(s, "b").reason == "budget_calls"
    assert s.budget.levels()["usd"] == pytest.approx(0.5)


def test_skip_reasons_are_bounded() -> None:
    assert set(SKIP_REASONS) == {"not_sampled", "budget_calls", "budget_usd"}


def test_a_rule_found_by_the_caller_overrides_the_rate_but_not_configured_rules() -> None:
    s = sampler(
        default_rate=0.0,
        always_judge=[AlwaysJudgeRule(name="negative", field="feedback", equals="negative")],
    )
    forced = s.decide(turn("e-1", conversation_id="c-1"), rule="rule:identifier_tripwire")
    assert forced == SampleDecision(True, "rule:identifier_tripwire")
    both = s.decide(
        turn("e-2", conversation_id="c-2", feedback={"rating": "negative"}),
        rule="rule:identifier_tripwire",
    )
    assert both == SampleDecision(True, "rule:negative")
    assert decide(s, "c-3") == SampleDecision(False, "not_sampled")


def test_reserve_and_settle_charge_jobs_to_the_same_buckets() -> None:
    clock = ManualClock()
    sampler = Sampler(
        SamplingConfig(
            budget_calls_per_hour=10, budget_usd_per_hour=1.0, estimated_usd_per_call=0.05
        ),
        clock,
    )
    assert sampler.budget.reserve(8) is None
    assert sampler.budget.levels() == {"calls": pytest.approx(2), "usd": pytest.approx(0.6)}
    assert sampler.budget.reserve(3) == "budget_calls"  # refused: nothing taken
    sampler.budget.settle(8, 6, 0.1)  # fewer calls and cheaper than estimated
    assert sampler.budget.levels() == {"calls": pytest.approx(4), "usd": pytest.approx(0.9)}
    assert sampler.budget.reserve(4) is None
    assert sampler.budget.reserve(1) == "budget_calls"
    usd_only = Sampler(
        SamplingConfig(**{**OPEN, "budget_usd_per_hour": 0.1, "estimated_usd_per_call": 0.05}),
        clock,
    )
    assert usd_only.budget.reserve(3) == "budget_usd"
    assert usd_only.budget.reserve(2) is None
