"""The demo's pinned baselines: each assistant's severe rates on one healthy loop (pure part),
and the settings they are pinned into (the offline judge only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.config.settings import load_settings
from monitor.demo.baselines import offline_judges, pin_baselines, severe_rates
from monitor.demo.examples import load_examples
from monitor.demo.regression import FLAWS_FILE, load_flaws, plan_regression
from monitor.scoring.turn import DEFAULT_CRITICAL_METRICS
from tests.fixtures.databases import make_turn
from tests.fixtures.detection import verdict

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "turns.jsonl"


def test_severe_rates_per_assistant_and_signal_are_never_zero() -> None:
    turns = [make_turn(f"e{i}", assistant="a" if i < 9 else "b") for i in range(12)]
    verdicts = [verdict(t, severe=i in (0, 1, 9)) for i, t in enumerate(turns)]
    verdicts.append(verdict(make_turn("failed", assistant="a"), False, failed=True))
    rates = severe_rates(verdicts, DEFAULT_CRITICAL_METRICS)
    assert rates["a"]["turn_severe"] == pytest.approx(2.5 / 10)  # the failed one not counted
    assert rates["b"]["turn_severe"] == pytest.approx(1.5 / 4)
    assert set(rates["a"]) == {"turn_severe", *(f"{m}_severe" for m in DEFAULT_CRITICAL_METRICS)}
    assert all(0 < r < 1 for per in rates.values() for r in per.values())


def test_the_demo_pins_the_healthy_loops_rates_with_the_offline_judge_only() -> None:
    docs = load_examples(EXAMPLES)
    plan = plan_regression(docs, load_flaws(EXAMPLES.parent / FLAWS_FILE))
    assert plan is not None
    settings = pin_baselines(load_settings(), plan.healthy)
    pinned = settings.detection.baselines
    assert set(pinned) == {plan.canary, plan.stable}
    # The healthy canary is as good as the stable one: no higher severe rate than 10 %.
    assert all(0 < r["turn_severe"] < 0.1 for r in pinned.values())
    # An LLM judge: nothing judged up front, nothing pinned.
    llm = load_settings(
        None, judges={"j": {"model": "m", "base_url": "http://127.0.0.1:1/v1"}}, judge="j"
    )
    assert not offline_judges(llm)
    assert pin_baselines(llm, plan.healthy) is llm
    # Baselines the configuration pins are kept as they are.
    own = load_settings(None, detection={"baselines": {plan.canary: {"turn_severe": 0.2}}})
    assert pin_baselines(own, plan.healthy) is own
