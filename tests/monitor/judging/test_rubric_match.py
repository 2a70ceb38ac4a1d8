"""Which rubric entry a live turn answers: the id label first, then configured text matching."""

from __future__ import annotations

from monitor.judging.rubric_match import RubricMatcher
from monitor.judging.rubric_set import parse_rubric_set
from tests.fixtures.databases import make_turn

RUBRICS = parse_rubric_set(
    "- id: vpn\n  query: VPN drops\n  questions: [a]\n"
    "- id: why\n  query: Why does my VPN drop?\n  questions: [b]\n",
    "r.yaml",
)


def test_the_label_wins_over_text_matching() -> None:
    turn = make_turn("e", labels={"rubric_id": "why"})
    assert (RubricMatcher(RUBRICS).match(turn) or RUBRICS.entries[0]).id == "why"


def test_case_subject_matches_ignoring_case_and_spacing() -> None:
    turn = make_turn("e", case={"subject": "  vpn   DROPS ", "description": "d"})
    assert RubricMatcher(RUBRICS).match(turn) == RUBRICS.get("vpn")
    assert RubricMatcher(RUBRICS, match_case_subject=False).match(turn) is None


def test_query_matching_is_opt_in() -> None:
    turn = make_turn(
        "e", case={"subject": "other", "description": "d"}
    )  # query "Why does my VPN drop?"
    assert RubricMatcher(RUBRICS).match(turn) is None
    assert RubricMatcher(RUBRICS, match_query=True).match(turn) == RUBRICS.get("why")


def test_an_unknown_label_value_falls_back_to_text_matching() -> None:
    turn = make_turn("e", labels={"rubric_id": "nope"})
    assert RubricMatcher(RUBRICS).match(turn) == RUBRICS.get("vpn")
    assert RubricMatcher(RUBRICS, label="issue").match(
        make_turn("e", labels={"issue": "why"})
    ) == RUBRICS.get("why")
