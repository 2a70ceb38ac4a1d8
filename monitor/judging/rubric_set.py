"""Rubric sets (Pencils Down): per query or known issue, up to 10 questions a good answer covers.

People edit these files by hand, so a bad file is reported with the file, the line and the
field (``rubrics.yaml:14: questions.2.question: String should have at least 1 character``),
never as a traceback. Two formats, chosen by the file suffix:

YAML (``.yaml``/``.yml``): a list of entries::

    - id: bkp-catalog-lock              # qrels query id: no whitespace
      query: Nightly full backup fails with E4021 after upgrade to 4.12.0
      reviewed: true                    # false until a person checked the questions
      questions:
        - What causes E4021 after the 4.12.0 upgrade?       # a plain string, or
        - question: Which command releases the stale lock?  # a mapping with a gold answer
          gold_answer: backupctl catalog unlock --force

JSONL (``.jsonl``): one entry per line as a JSON object with the same fields.

``reviewed: false`` (what ``casewatch rubric generate`` writes) marks generated questions no
person has checked yet; graders warn about such entries (``unreviewed``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from monitor.errors import RubricSetError

MAX_QUESTIONS = 10
MAX_QUESTION_CHARS = 500

EntryId = Annotated[
    str, StringConstraints(min_length=1, max_length=128, pattern=r"^[^\s]+$", strip_whitespace=True)
]
Text = Annotated[str, StringConstraints(min_length=1, strip_whitespace=True)]
QuestionText = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_QUESTION_CHARS, strip_whitespace=True)
]


class RubricQuestion(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    question: QuestionText
    gold_answer: Text | None = None


class RubricEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: EntryId
    query: Text
    questions: list[RubricQuestion] = Field(min_length=1, max_length=MAX_QUESTIONS)
    reviewed: bool = False

    @field_validator("questions", mode="before")
    @classmethod
    def _plain_strings(cls, value: Any) -> Any:
        # A bare string is a question without a gold answer: the common hand-written form.
        if isinstance(value, list):
            return [{"question": q} if isinstance(q, str) else q for q in value]
        return value

    @model_validator(mode="after")
    def _distinct(self) -> RubricEntry:
        seen: set[str] = set()
        for q in self.questions:
            key = " ".join(q.question.lower().split())
            if key in seen:
                raise ValueError(f"question {q.question!r} appears twice")
            seen.add(key)
        return self


class RubricSet(BaseModel):
    """The entries of one file, by id (ids are unique)."""

    model_config = ConfigDict(frozen=True)

    entries: tuple[RubricEntry, ...]

    def get(self, entry_id: str) -> RubricEntry | None:
        for entry in self.entries:
            if entry.id == entry_id:
                return entry
        return None

    @property
    def unreviewed(self) -> list[str]:
        return [e.id for e in self.entries if not e.reviewed]


# ---------------------------------------------------------------- reading


def _loc(parts: Iterable[int | str]) -> str:
    return ".".join(str(p) for p in parts) or "(entry)"


def _describe(error: ValidationError, line_of: Any) -> list[str]:
    problems = []
    for err in error.errors():
        loc = tuple(err["loc"])
        problems.append(f"line {line_of(loc)}: {_loc(loc)}: {err['msg']}")
    return problems


def _yaml_line(node: yaml.Node, loc: tuple[int | str, ...]) -> int:
    """1-based line of the deepest node along ``loc`` that exists in the YAML tree."""
    line = node.start_mark.line + 1
    for part in loc:
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == part:
                    child = value
                    line = key.start_mark.line + 1
                    break
        elif (
            isinstance(node, yaml.SequenceNode)
            and isinstance(part, int)
            and 0 <= part < len(node.value)
        ):
            child = node.value[part]
            line = child.start_mark.line + 1
        if child is None:
            break
        node = child
    return line


def _duplicate_keys(node: yaml.Node) -> list[str]:
    """Keys given twice in one mapping (YAML loaders silently keep the last one)."""
    found = []
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                if key.value in seen:
                    found.append(f"line {key.start_mark.line + 1}: key {key.value!r} given twice")
                seen.add(key.value)
            found.extend(_duplicate_keys(value))
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            found.extend(_duplicate_keys(item))
    return found


def _parse_yaml(path: Path, text: str) -> list[tuple[int, Any, Any]]:
    """(line, data, line_of) per entry."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise RubricSetError(
            path, [f"{where}not valid YAML ({getattr(exc, 'problem', exc)})"]
        ) from None
    if root is None or data is None:
        raise RubricSetError(path, ["the file holds no entries"])
    if not isinstance(root, yaml.SequenceNode) or not isinstance(data, list):
        raise RubricSetError(
            path, [f"line {root.start_mark.line + 1}: expected a list of entries (`- id: ...`)"]
        )
    duplicates = _duplicate_keys(root)
    if duplicates:
        raise RubricSetError(path, duplicates)
    entries = []
    for node, item in zip(root.value, data, strict=True):

        def line_of(loc: tuple[int | str, ...], node: yaml.Node = node) -> int:
            return _yaml_line(node, loc)

        entries.append((node.start_mark.line + 1, item, line_of))
    return entries


def _parse_jsonl(path: Path, text: str) -> list[tuple[int, Any, Any]]:
    entries = []
    problems = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            item = json.loads(raw)
        except ValueError as exc:
            problems.append(f"line {number}: not valid JSON ({exc.args[0]})")
            continue

        def line_of(_loc: tuple[int | str, ...], number: int = number) -> int:
            return number

        entries.append((number, item, line_of))
    if problems:
        raise RubricSetError(path, problems)
    if not entries:
        raise RubricSetError(path, ["the file holds no entries"])
    return entries


def parse_rubric_set(text: str, path: Path | str = "<rubric set>") -> RubricSet:
    """Validate ``text`` (YAML, or JSONL when ``path`` ends in .jsonl). Every problem of the
    file is reported at once, each with its line, so one edit round fixes them all."""
    path = Path(path)
    raw = _parse_jsonl(path, text) if path.suffix == ".jsonl" else _parse_yaml(path, text)
    problems: list[str] = []
    entries: list[RubricEntry] = []
    first_line: dict[str, int] = {}
    for line, item, line_of in raw:
        if not isinstance(item, dict):
            problems.append(f"line {line}: an entry must be a mapping with id, query, questions")
            continue
        try:
            entry = RubricEntry.model_validate(item)
        except ValidationError as exc:
            problems.extend(_describe(exc, line_of))
            continue
        if entry.id in first_line:
            problems.append(
                f"line {line}: id: {entry.id!r} already used on line {first_line[entry.id]}"
            )
            continue
        first_line[entry.id] = line
        entries.append(entry)
    if problems:
        raise RubricSetError(path, problems)
    return RubricSet(entries=tuple(entries))


def load_rubric_set(path: Path) -> RubricSet:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RubricSetError(path, [f"cannot read the file ({exc})"]) from exc
    return parse_rubric_set(text, path)


# ---------------------------------------------------------------- writing


def _entry_doc(entry: RubricEntry) -> dict[str, Any]:
    questions: list[Any] = [
        q.question if q.gold_answer is None else q.model_dump(exclude_none=True)
        for q in entry.questions
    ]
    return {
        "id": entry.id,
        "query": entry.query,
        "reviewed": entry.reviewed,
        "questions": questions,
    }


def dump_rubric_set(entries: Iterable[RubricEntry], path: Path | str = "rubrics.yaml") -> str:
    """The text of a rubric file (YAML, or JSONL for a .jsonl path) that reads back equal."""
    docs = [_entry_doc(e) for e in entries]
    if Path(path).suffix == ".jsonl":
        return "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs)
    body: str = yaml.safe_dump(docs, sort_keys=False, allow_unicode=True, width=100)
    return body


__all__ = [
    "MAX_QUESTIONS",
    "RubricEntry",
    "RubricQuestion",
    "RubricSet",
    "RubricSetError",
    "dump_rubric_set",
    "load_rubric_set",
    "parse_rubric_set",
]
