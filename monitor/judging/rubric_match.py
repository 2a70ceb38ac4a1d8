"""Which rubric entry a live turn answers (pure).

In order: the turn's label ``label`` (default ``rubric_id``) naming an entry id — how a support
tool tags a conversation with its known issue; else, when configured, an entry whose query
equals the case subject, or the turn's query (case-insensitive, whitespace collapsed). A turn
matching nothing is not graded.
"""

from __future__ import annotations

from monitor.judging.rubric_set import RubricEntry, RubricSet
from monitor.schema.turn import TurnEvent


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


class RubricMatcher:
    def __init__(
        self,
        rubrics: RubricSet,
        *,
        label: str = "rubric_id",
        match_case_subject: bool = True,
        match_query: bool = False,
    ) -> None:
        self._by_id = {e.id: e for e in rubrics.entries}
        self._by_query: dict[str, RubricEntry] = {}
        for e in rubrics.entries:
            self._by_query.setdefault(_norm(e.query), e)
        self._label = label
        self._subject = match_case_subject
        self._query = match_query

    def match(self, turn: TurnEvent) -> RubricEntry | None:
        entry_id = turn.labels.get(self._label)
        if entry_id is not None and entry_id in self._by_id:
            return self._by_id[entry_id]
        if self._subject and (entry := self._by_query.get(_norm(turn.case.subject))):
            return entry
        if self._query and (entry := self._by_query.get(_norm(turn.query))):
            return entry
        return None


__all__ = ["RubricMatcher"]
