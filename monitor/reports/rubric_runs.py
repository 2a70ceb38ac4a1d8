"""Grading system responses against a rubric set into qrels and TREC runs (Pencils Down phase 3).

Responses are JSONL, one line per (system, query)::

    {"system": "bm25", "query": "bkp-catalog-lock",
     "passages": [{"id": "kb-1042#2", "text": "..."}, ...]}     # a ranking, best first
    {"system": "rag-v2", "query": "bkp-catalog-lock", "answer": "..."}   # a generated answer

``query`` is a rubric entry id. A ranked passage is graded as-is (truncated to 400 tokens) and
keeps its id; a generated answer is split into passages ``<system>~<query>~p<n>`` ranked in
answer order. A passage id shared by several systems is graded once (its text must then be
the same). Each passage's label is ``relevance(grades, m)``; the qrels hold every graded
passage and one run per system lists its passages in rank order.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from monitor.errors import ResponsesError, RubricGradingFailed
from monitor.judging.passages import split_passages
from monitor.judging.rubric_grader import TextGrading
from monitor.judging.rubric_prompt import PARSE_PATHS
from monitor.judging.rubric_set import RubricEntry, RubricSet

TrecId = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=r"^\S+$")]


class Passage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: TrecId
    text: str


class Response(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    system: TrecId
    query: TrecId
    passages: list[Passage] | None = Field(default=None, min_length=1)
    answer: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Response:
        if (self.passages is None) == (self.answer is None):
            raise ValueError("give either 'passages' (a ranking) or 'answer' (generated text)")
        if self.passages is not None:
            ids = [p.id for p in self.passages]
            if len(set(ids)) != len(ids):
                raise ValueError("a passage id appears twice in one ranking")
        return self

    def ranked(self, max_tokens: int) -> list[Passage]:
        if self.passages is not None:
            return list(self.passages)
        chunks = split_passages(self.answer or "", max_tokens)
        return [
            Passage(id=f"{self.system}~{self.query}~p{i}", text=t) for i, t in enumerate(chunks, 1)
        ]


def read_responses(paths: Iterable[Path], rubrics: RubricSet) -> list[Response]:
    """Every response of every file; all problems reported at once with file and line."""
    responses: list[Response] = []
    problems: list[str] = []
    seen: dict[tuple[str, str], str] = {}
    for path in paths:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ResponsesError(path, [f"cannot read the file ({exc})"]) from exc
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            where = f"{path.name}:{number}"
            try:
                response = Response.model_validate(json.loads(line))
            except ValueError as exc:
                if isinstance(exc, ValidationError):
                    problems.extend(
                        f"{where}: {'.'.join(str(p) for p in e['loc']) or '(line)'}: {e['msg']}"
                        for e in exc.errors()
                    )
                else:
                    problems.append(f"{where}: not valid JSON ({exc})")
                continue
            if rubrics.get(response.query) is None:
                problems.append(f"{where}: query {response.query!r} has no rubric entry")
                continue
            key = (response.system, response.query)
            if key in seen:
                problems.append(
                    f"{where}: system {key[0]!r} answered {key[1]!r} before ({seen[key]})"
                )
                continue
            seen[key] = where
            responses.append(response)
    if problems:
        raise ResponsesError(", ".join(str(p) for p in paths), problems)
    if not responses:
        raise ResponsesError(", ".join(str(p) for p in paths), ["no responses"])
    return responses


@dataclass
class RubricRuns:
    qrels: dict[str, dict[str, int]]
    runs: dict[str, dict[str, list[tuple[str, float]]]]  # system -> query -> ranking
    gradings: dict[tuple[str, str], TextGrading]  # (query, passage id) -> grading
    failures: dict[tuple[str, str], str] = field(default_factory=dict)
    path_counts: dict[str, int] = field(default_factory=dict)

    def audit_rows(self) -> list[dict[str, Any]]:
        """One row per graded passage with every question's grade and extracted answer."""
        rows = []
        for (query, doc), g in sorted(self.gradings.items()):
            rows.append(
                {
                    "query": query,
                    "doc": doc,
                    "relevance": self.qrels[query][doc],
                    "grades": [
                        {
                            "question": q.question,
                            "grade": q.grade,
                            "answer": q.answer,
                            "path": q.path,
                        }
                        for q in g.grades
                    ],
                }
            )
        return rows


def grade_responses(
    responses: Sequence[Response],
    rubrics: RubricSet,
    grade: Callable[[RubricEntry, str], TextGrading],
    *,
    m: int = 1,
    max_tokens: int = 400,
) -> RubricRuns:
    """Grade each distinct (query, passage) once with ``grade`` (a ``grade_passage``);
    failures are collected (fail-closed: the caller must not write files when any exist)."""
    texts: dict[tuple[str, str], str] = {}
    runs: dict[str, dict[str, list[tuple[str, float]]]] = {}
    conflicts: list[str] = []
    for r in responses:
        ranked = r.ranked(max_tokens)
        runs.setdefault(r.system, {})[r.query] = [
            (p.id, float(len(ranked) - i)) for i, p in enumerate(ranked)
        ]
        for p in ranked:
            key = (r.query, p.id)
            if key in texts and texts[key] != p.text:
                conflicts.append(f"passage {p.id!r} of query {r.query!r} has two texts")
            texts.setdefault(key, p.text)
    if conflicts:
        raise ResponsesError("responses", conflicts)
    result = RubricRuns(qrels={}, runs=runs, gradings={})
    paths: Counter[str] = Counter()
    for (query, doc), text in sorted(texts.items()):
        entry = rubrics.get(query)
        if entry is None:
            raise ResponsesError("responses", [f"query {query!r} has no rubric entry"])
        try:
            graded = grade(entry, text)
        except RubricGradingFailed as exc:
            result.failures[(query, doc)] = exc.reason
            continue
        result.gradings[(query, doc)] = graded
        result.qrels.setdefault(query, {})[doc] = graded.relevance(m)
        paths.update(graded.path_counts)
    result.path_counts = {p: paths.get(p, 0) for p in PARSE_PATHS}
    return result


__all__ = [
    "Passage",
    "Response",
    "ResponsesError",
    "RubricRuns",
    "grade_responses",
    "read_responses",
]
