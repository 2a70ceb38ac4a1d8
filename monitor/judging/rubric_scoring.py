"""From grades to relevance labels and coverage (Pencils Down §4.3; pure).

- ``relevance(grades, m)``: the passage's label. With ``m = 1`` the best grade over the rubric
  questions (Eq. 1); with ``m > 1`` the best grade reached by at least ``m`` questions (the
  m-th highest grade), so one lucky question does not make a passage relevant.
- ``answer_grades``: a generated answer split into several passages answers a question as
  well as its best passage does.
- ``coverage``: the share of rubric questions answered with at least ``threshold`` (4 by
  default: Pencils Down §6.5 maps grades 4–5 to relevant), the live signal per answer.
"""

from __future__ import annotations

from collections.abc import Sequence

RELEVANT_GRADE = 4


def relevance(grades: Sequence[int], m: int = 1) -> int:
    """The highest grade reached by at least ``m`` questions (0 with fewer questions)."""
    if m < 1:
        raise ValueError("m must be >= 1")
    ranked = sorted(grades, reverse=True)
    return ranked[m - 1] if len(ranked) >= m else 0


def answer_grades(per_passage: Sequence[Sequence[int]]) -> list[int]:
    """Per question, the best grade any passage of the answer got (rows: passages)."""
    if not per_passage:
        return []
    return [max(column) for column in zip(*per_passage, strict=True)]


def coverage(grades: Sequence[int], threshold: int = RELEVANT_GRADE) -> float:
    """Share of questions graded ``threshold`` or better (0.0 for an empty rubric)."""
    if not grades:
        return 0.0
    return sum(1 for g in grades if g >= threshold) / len(grades)


__all__ = ["RELEVANT_GRADE", "answer_grades", "coverage", "relevance"]
