"""Agreement before/after arbitration and the arbiter budget, on hand-built panel verdicts."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from monitor.commands.batch_report import panel_text
from monitor.judging import arbitration
from monitor.judging.verdicts import failed_verdict, scored_verdict
from monitor.reports import panel_report
from monitor.schema.turn import METRICS, JudgeScores, Judgment, MetricScore, TurnEvent
from monitor.scoring.turn import DEFAULT_PROFILE

GOOD, BAD, MID = 0.9, 0.1, 0.45  # bands none, severe, moderate


def turn(i: int) -> TurnEvent:
    return TurnEvent.model_validate(
        {
            "event_id": f"e{i}",
            "conversation_id": f"c{i}",
            "turn_index": 0,
            "timestamp": datetime(2026, 11, 2, tzinfo=UTC),
            "assistant": {"name": "helpdesk", "version": "1", "model": "m"},
            "case": {"subject": "s", "description": "d"},
            "query": "q",
            "answer": "a",
        }
    )


def judgment(name: str, role: str, hallucination: float | None, cost: float = 0.0) -> Judgment:
    if hallucination is None:
        return Judgment(
            judge=name, kind="openai", model=name, role=role, status="judge_failed",
            failure_reason="server_error", cost_usd=cost,
        )  # fmt: skip
    scores = {m: GOOD for m in METRICS} | {"hallucination": hallucination}
    doc = {m: MetricScore(score=s, justification="j") for m, s in scores.items()}
    return Judgment(
        judge=name, kind="openai", model=name, role=role, status="ok",
        scores=JudgeScores(**doc), cost_usd=cost,
    )  # fmt: skip


def panel_verdict(
    i: int, a: float | None, b: float | None, arb: float | None = None, *, cost: float = 0.0
) -> dict[str, Any]:
    """A verdict as the panel would write it, dumped like a granular JSONL line."""
    js = [judgment("judge-a", "primary", a, cost), judgment("judge-b", "primary", b, cost)]
    maps = [j.scores.score_map() for j in js if j.scores is not None]
    trigger = None
    if len(maps) == 2:
        trigger = arbitration.detect(maps[0], maps[1]).trigger
    elif len(maps) < 2 or arb is not None:
        trigger = arbitration.PRIMARY_FAILED
    if trigger is not None and arb is not None:
        j = judgment("judge-arbiter", "arbiter", arb, 2 * cost)
        js.append(j)
        if j.scores is not None:
            maps.append(j.scores.score_map())
    arbitrated = len(js) == 3
    if len(maps) < 2:
        v = failed_verdict(
            turn(i), js, "panel_insufficient", weight_profile="default",
            arbitrated=arbitrated, arbitration_trigger=trigger,
        )  # fmt: skip
    else:
        final = (
            arbitration.combine_arbitrated(maps) if trigger else arbitration.combine_agree(*maps)
        )
        v = scored_verdict(
            turn(i), final, js, weights=DEFAULT_PROFILE, weight_profile="default",
            critical=["hallucination"], arbitrated=arbitrated, arbitration_trigger=trigger,
        )  # fmt: skip
    doc: dict[str, Any] = json.loads(v.model_dump_json())
    return doc


# Humans: hallucination is fine on e0, e1, e3 and severe on e2.
LABELS = {f"e{i}": {"hallucination": "severe" if i == 2 else "none"} for i in range(4)}


def four_turns(cost: float = 0.0) -> list[dict[str, Any]]:
    return [
        panel_verdict(0, GOOD, GOOD, cost=cost),
        panel_verdict(1, GOOD, GOOD, cost=cost),
        panel_verdict(2, GOOD, BAD, BAD, cost=cost),  # B right, the arbiter sides with B
        panel_verdict(3, GOOD, GOOD, cost=cost),
    ]


def hallucination_row(report: panel_report.PanelReport, name: str) -> tuple[Any, ...]:
    e = next(e for e in report.evaluators if e.name == name)
    row = e.row("hallucination")
    assert row is not None
    return e.scored, e.coverage, row.n, row.accuracy


def test_primaries_before_and_after_arbitration() -> None:
    report = panel_report.panel_report(four_turns(), LABELS)
    assert [e.name for e in report.evaluators] == [
        "judge-a", "judge-b", panel_report.BEFORE, panel_report.AFTER,
    ]  # fmt: skip
    assert hallucination_row(report, "judge-a") == (4, 1.0, 4, 0.75)
    assert hallucination_row(report, "judge-b") == (4, 1.0, 4, 1.0)
    # Before arbitration the disputed turn has no panel answer: 3 of 4 turns covered.
    assert hallucination_row(report, panel_report.BEFORE) == (3, 0.75, 3, 1.0)
    assert hallucination_row(report, panel_report.AFTER) == (4, 1.0, 4, 1.0)
    after = next(e for e in report.evaluators if e.kind == "after").row("hallucination")
    assert after is not None and after.kappa == pytest.approx(1.0)
    assert after.macro_f1 == pytest.approx(1.0)
    assert report.turns == report.labelled == 4
    assert report.disagreements == 1 and report.disagreement_rate == 0.25
    assert report.arbiter_calls == 1 and report.arbiter_call_share == 0.25


def test_pooled_row_covers_every_labelled_metric() -> None:
    labels = {e: {m: "none" for m in METRICS} for e in LABELS}
    report = panel_report.panel_report(four_turns(), labels)
    a = next(e for e in report.evaluators if e.name == "judge-a")
    pooled = a.row(panel_report.POOLED)
    assert pooled is not None and pooled.n == 4 * len(METRICS)
    assert pooled.accuracy == pytest.approx(1.0)  # judge-a scores GOOD everywhere


def test_cost_ratio_in_dollars() -> None:
    # Primary calls cost 0.01, an arbiter call 0.02: panel 8·0.01 + 0.02 = 0.10;
    # three judges on every turn 4·(0.01 + 0.01 + 0.02) = 0.16.
    report = panel_report.panel_report(four_turns(cost=0.01), LABELS)
    assert report.cost_basis == "usd"
    assert report.cost_usd == pytest.approx(0.10)
    assert report.three_judges_cost_usd == pytest.approx(0.16)
    assert report.cost_ratio == pytest.approx(0.625)


def test_cost_ratio_falls_back_to_calls_when_nothing_costs() -> None:
    report = panel_report.panel_report(four_turns(), LABELS)
    assert report.cost_basis == "calls"
    assert report.cost_ratio == pytest.approx((2 * 4 + 1) / (3 * 4))


def test_failed_turns_count_as_disputes_and_lower_after_coverage() -> None:
    verdicts = [
        *four_turns(),
        panel_verdict(4, GOOD, None, GOOD),  # primary failed, arbiter answered
        panel_verdict(5, GOOD, None),  # primary failed, no arbiter: panel_insufficient
    ]
    labels = {**LABELS, "e4": {"hallucination": "none"}, "e5": {"hallucination": "none"}}
    report = panel_report.panel_report(verdicts, labels)
    assert report.judge_failed == 1 and report.disagreements == 3
    assert report.arbiter_calls == 2
    assert hallucination_row(report, "judge-b") == (4, 4 / 6, 4, 1.0)
    assert hallucination_row(report, panel_report.AFTER) == (5, 5 / 6, 5, 1.0)


def test_turn_band_labels_use_the_given_weights() -> None:
    labels = {e: {"turn_band": "severe" if e == "e2" else "none"} for e in LABELS}
    report = panel_report.panel_report(four_turns(), labels, critical=["hallucination"])
    b = next(e for e in report.evaluators if e.name == "judge-b").row("turn_band")
    a = next(e for e in report.evaluators if e.name == "judge-a").row("turn_band")
    assert b is not None and a is not None
    assert (a.accuracy, b.accuracy) == (0.75, 1.0)


def test_single_judge_verdicts_are_ignored_and_none_is_an_error() -> None:
    single = json.loads(
        scored_verdict(
            turn(9), {m: GOOD for m in METRICS}, [judgment("heuristic", "single", GOOD)],
            weights=DEFAULT_PROFILE, weight_profile="default", critical=[],
        ).model_dump_json()
    )  # fmt: skip
    assert panel_report.panel_report([*four_turns(), single], LABELS).turns == 4
    with pytest.raises(ValueError, match="two-primary panel"):
        panel_report.panel_report([single], LABELS)


def test_unknown_band_in_labels_is_rejected() -> None:
    with pytest.raises(ValueError, match="fine"):
        panel_report.panel_report(four_turns(), {"e0": {"hallucination": "fine"}})


def test_table_and_dict() -> None:
    report = panel_report.panel_report(four_turns(cost=0.01), LABELS)
    table = panel_text(report)
    assert "disagreement rate 25.0%" in table and "0.625 x three judges" in table
    assert "after arb." in table and "Cohen's kappa" in table
    halluc = [line for line in table.splitlines() if line.startswith("hallucination")]
    assert len(halluc) == 3  # one line per statistic
    assert halluc[0].split()[1:] == ["0.750", "1.000", "1.000", "1.000"]
    doc = json.loads(json.dumps(report.to_dict()))
    assert doc["evaluators"][panel_report.BEFORE]["coverage"] == 0.75
