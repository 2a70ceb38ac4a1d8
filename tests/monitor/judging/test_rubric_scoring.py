"""Relevance labels (max, or the grade reached by m questions) and coverage."""

from __future__ import annotations

import pytest

from monitor.judging.rubric_scoring import answer_grades, coverage, relevance


def test_relevance_is_the_best_grade_with_m_1() -> None:
    # Figure 1 of Pencils Down, passage p1: grades 4, 4, 0, 0, 4 -> label 4.
    assert relevance([4, 4, 0, 0, 4]) == 4
    assert relevance([0, 5, 1]) == 5


def test_relevance_with_m_is_the_grade_at_least_m_questions_reach() -> None:
    assert relevance([5, 4, 4, 1], m=2) == 4
    assert relevance([5, 4, 4, 1], m=3) == 4
    assert relevance([5, 4, 4, 1], m=4) == 1
    assert relevance([5], m=2) == 0  # fewer questions than m: not relevant
    with pytest.raises(ValueError, match="m must be"):
        relevance([1], m=0)


def test_an_answer_answers_a_question_as_well_as_its_best_passage() -> None:
    assert answer_grades([[0, 4, 2], [5, 1, 2]]) == [5, 4, 2]
    assert answer_grades([]) == []


def test_coverage_is_the_share_graded_4_or_better() -> None:
    assert coverage([5, 4, 3, 0]) == 0.5
    assert coverage([5, 4, 3, 0], threshold=3) == 0.75
    assert coverage([]) == 0.0
