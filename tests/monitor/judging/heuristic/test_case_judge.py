"""The offline case judge: each case metric reads the failure it is for, and on the examples'
conversations the canary's regressed answers give worse cases than the stable assistant's."""

from __future__ import annotations

import collections
import json
from pathlib import Path

from monitor.judging.heuristic.case_judge import HeuristicCaseJudge, heuristic_case_scores
from monitor.schema.turn import Band, TurnEvent
from monitor.scoring import case as case_scoring
from tests.support.cases import case_of, turn

ROOT = Path(__file__).resolve().parents[4]


def test_a_clean_case_scores_high_on_every_metric() -> None:
    scores = heuristic_case_scores(
        case_of(
            turn("c", 0),
            turn("c", 1, query="That worked, the VPN is stable now. Thanks!", answer="Great."),
        )
    )
    assert scores.resolution_outcome == "resolved"
    assert all(v >= 0.86 for v in scores.score_map().values()), scores


def test_a_step_the_customer_already_ran_repeated_is_a_workflow_failure() -> None:
    scores = heuristic_case_scores(
        case_of(
            turn("c", 0, query="I already ran `vpnctl reset --profile corp`, no luck."),
            turn("c", 1, answer="Run `vpnctl reset --profile corp` and reconnect."),
        )
    )
    assert scores.workflow_alignment.score < 0.61
    assert "vpnctl reset --profile corp" in scores.workflow_alignment.justification


def test_a_changed_identifier_across_turns_is_severe() -> None:
    scores = heuristic_case_scores(
        case_of(turn("c", 0), turn("c", 1, answer="Error 0x80070050 means the driver is old."))
    )
    assert scores.consistency.score <= 0.3 and "0x80070050" in scores.consistency.justification
    assert case_scoring.case_band(scores.score_map(), scores.resolution_outcome) is Band.SEVERE


def test_an_answer_off_the_issue_and_a_handoff() -> None:
    scores = heuristic_case_scores(
        case_of(
            turn("c", 0),
            turn("c", 1, answer="To change your printer toner, open the front panel."),
            turn("c", 2, answer="I have escalated this to a support engineer."),
        )
    )
    assert scores.issue_tracking.score < 0.61 and "turn 1" in scores.issue_tracking.justification
    assert scores.resolution_outcome == "handed_off"


def test_a_last_answer_that_cannot_help_leaves_the_case_unresolved() -> None:
    judge = HeuristicCaseJudge()
    judgment, cut = judge.judge_case(
        case_of(turn("c", 0, answer="I don't have enough information to answer that."))
    )
    assert judgment.ok and cut == 0 and judgment.kind == "heuristic"
    assert judgment.scores is not None and judgment.scores.resolution_outcome == "unresolved"


def test_on_the_examples_the_canary_has_more_severe_cases_than_the_stable_assistant() -> None:
    cases: dict[tuple[str, str], list[TurnEvent]] = collections.defaultdict(list)
    for line in (ROOT / "examples" / "turns.jsonl").read_text().splitlines():
        event = TurnEvent.model_validate(json.loads(line))
        cases[(event.assistant.name, event.conversation_id)].append(event)
    severe: collections.Counter[str] = collections.Counter()
    for (assistant, _), events in cases.items():
        events.sort(key=lambda e: e.turn_index)
        scores = heuristic_case_scores(case_of(*events))
        if case_scoring.case_band(scores.score_map(), scores.resolution_outcome) is Band.SEVERE:
            severe[assistant] += 1
    assert severe["acme-support-canary"] > severe["acme-support-stable"]
