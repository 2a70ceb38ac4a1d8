"""The canary's pure pieces: one run's figures (a failure makes the run failed, never
agreement), the baseline, and the judge-change note."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from monitor.reports.judge_canary import CanaryRun, CanaryTurn, baseline_of, score_run
from monitor.reports.judge_change import judge_change
from monitor.schema.turn import Band
from monitor.scoring.turn import BUILTIN_PROFILES, DEFAULT_CRITICAL_METRICS
from tests.fixtures.databases import make_judgment, make_turn

WEIGHTS = BUILTIN_PROFILES["default"]


def _turns() -> list[CanaryTurn]:
    return [
        CanaryTurn(make_turn("a"), {"hallucination": Band.SEVERE, "turn_band": Band.SEVERE}),
        CanaryTurn(make_turn("b"), {"hallucination": Band.NONE}),
    ]


def test_a_run_counts_agreement_score_and_severe_calls() -> None:
    judged = [make_judgment("j", score=0.1), make_judgment("j", score=0.95)]
    run = score_run(_turns(), judged, weights=WEIGHTS, critical=DEFAULT_CRITICAL_METRICS)
    assert run.status == "ok"
    assert run.agreement == 1.0
    assert run.severe == (True, False)
    assert run.mean_score == pytest.approx((0.1 + 0.95) / 2)


def test_a_failure_on_any_turn_makes_the_run_failed_without_agreement() -> None:
    judged = [make_judgment("j", score=0.1), make_judgment("j", ok=False)]
    run = score_run(_turns(), judged, weights=WEIGHTS, critical=DEFAULT_CRITICAL_METRICS)
    assert run.status == "failed" and run.agreement is None and run.severe == ()
    assert run.failure_reason


def test_the_baseline_ignores_failed_runs_and_keeps_a_positive_rate() -> None:
    ok = CanaryRun("ok", None, 4, 0.5, 0.8, (False,) * 4)
    failed = CanaryRun("failed", "timeout", 4, None, None, ())
    base = baseline_of([ok, failed, ok])
    assert base is not None and base.runs == 2 and base.observations == 8
    assert 0 < base.severe_rate < 0.1
    assert baseline_of([failed]) is None


def test_the_note_says_whether_the_judge_moved() -> None:
    since = datetime(2026, 11, 20, tzinfo=UTC)
    quiet = judge_change(since, [{"judge": "llm", "alarm": False, "status": "ok"}], ["h1"])
    assert not quiet.judge_moved and "the judge did not move" in quiet.sentence()
    moved = judge_change(
        since,
        [{"judge": "llm", "alarm": True, "status": "ok"}, {"judge": "llm", "alarm": False,
                                                           "status": "failed"}],
        ["h1", "h2"],
    )  # fmt: skip
    assert moved.canary_alarms == ("llm",) and moved.config_changed and moved.canary_failed == 1
    assert "suspect the judge before the assistant" in moved.sentence()
    assert moved.to_dict()["config_hashes"] == ["h1", "h2"]
