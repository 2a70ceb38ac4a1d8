"""Rubric files: what reads, and what each kind of bad input reports (file, line, field)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.errors import RubricSetError
from monitor.judging.rubric_set import (
    RubricEntry,
    RubricQuestion,
    dump_rubric_set,
    load_rubric_set,
    parse_rubric_set,
)

GOOD = """\
- id: bkp-catalog-lock
  query: Nightly full backup fails with E4021
  reviewed: true
  questions:
    - What causes E4021?
    - question: Which command releases the lock?
      gold_answer: backupctl catalog unlock --force
- id: vpn-mtu
  query: VPN drops large packets
  questions: ["Which MTU is recommended?"]
"""


def _error(text: str, name: str = "r.yaml") -> str:
    with pytest.raises(RubricSetError) as info:
        parse_rubric_set(text, name)
    return str(info.value)


def test_a_good_file_reads_with_plain_and_gold_questions() -> None:
    rs = parse_rubric_set(GOOD, "r.yaml")
    first = rs.entries[0]
    assert first.id == "bkp-catalog-lock"
    assert first.reviewed is True
    assert first.questions == [
        RubricQuestion(question="What causes E4021?"),
        RubricQuestion(
            question="Which command releases the lock?",
            gold_answer="backupctl catalog unlock --force",
        ),
    ]
    assert rs.get("vpn-mtu") is not None and rs.get("nope") is None
    # reviewed defaults to false: a file nobody marked as checked is flagged.
    assert rs.unreviewed == ["vpn-mtu"]


@pytest.mark.parametrize("name", ["r.yaml", "r.jsonl"])
def test_dump_reads_back_equal(name: str) -> None:
    rs = parse_rubric_set(GOOD, "r.yaml")
    again = parse_rubric_set(dump_rubric_set(rs.entries, name), name)
    assert again == rs


def test_eleven_questions_are_refused_naming_the_line_and_field() -> None:
    questions = "\n".join(f"    - question {i}?" for i in range(11))
    text = f"- id: a\n  query: q\n  questions:\n{questions}\n"
    message = _error(text)
    assert "r.yaml: line 3: questions: List should have at most 10 items" in message


def test_a_missing_field_names_the_entry_line() -> None:
    message = _error("- id: a\n  query: q\n- id: b\n  questions: [x]\n")
    assert "line 1: questions: Field required" in message
    assert "line 3: query: Field required" in message  # every problem at once


def test_an_empty_question_names_its_own_line() -> None:
    text = "- id: a\n  query: q\n  questions:\n    - ok?\n    - question: '  '\n"
    assert "line 5: questions.1.question: String should have at least 1 character" in _error(text)


def test_a_misspelt_field_is_refused_not_ignored() -> None:
    text = "- id: a\n  query: q\n  questions: [x]\n  reviewd: true\n"
    assert "line 4: reviewd: Extra inputs are not permitted" in _error(text)


def test_an_id_with_whitespace_is_refused_as_qrels_cannot_hold_it() -> None:
    assert "line 1: id: String should match pattern" in _error(
        "- id: a b\n  query: q\n  questions: [x]\n"
    )


def test_duplicate_ids_and_duplicate_questions_are_refused() -> None:
    text = "- id: a\n  query: q\n  questions: [x]\n- id: a\n  query: q2\n  questions: [y, Y]\n"
    message = _error(text)
    assert "question 'Y' appears twice" in message
    text = "- id: a\n  query: q\n  questions: [x]\n- id: a\n  query: q2\n  questions: [y]\n"
    assert "line 4: id: 'a' already used on line 1" in _error(text)


def test_a_key_given_twice_is_refused_rather_than_silently_overwritten() -> None:
    assert "line 3: key 'query' given twice" in _error(
        "- id: a\n  query: q\n  query: r\n  questions: [x]\n"
    )


def test_broken_yaml_reports_its_line() -> None:
    assert "line 3: not valid YAML" in _error("- id: a\n  query: [unclosed\n  questions: []\n")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "the file holds no entries"),
        ("id: a\nquery: q\n", "line 1: expected a list of entries"),
        ("- just a string\n", "line 1: an entry must be a mapping"),
        (
            "- id: a\n  query: q\n  questions: yes\n",
            "line 3: questions: Input should be a valid list",
        ),
        (
            "- id: a\n  query: q\n  reviewed: maybe\n  questions: [x]\n",
            "line 3: reviewed: Input should be a valid boolean",
        ),
    ],
)
def test_wrong_shapes(text: str, expected: str) -> None:
    assert expected in _error(text)


def test_jsonl_errors_name_the_line() -> None:
    good = json.dumps({"id": "a", "query": "q", "questions": ["x?"]})
    text = f"{good}\n\n{{not json\n" + json.dumps({"id": "b", "query": "", "questions": ["x?"]})
    message = _error(text, "r.jsonl")
    assert "line 3: not valid JSON" in message
    text = f"{good}\n" + json.dumps({"id": "b", "query": "", "questions": ["x?"]}) + "\n"
    assert "r.jsonl: line 2: query: String should have at least 1 character" in _error(
        text, "r.jsonl"
    )


def test_an_unreadable_file_is_a_rubric_error(tmp_path: Path) -> None:
    with pytest.raises(RubricSetError, match="cannot read the file"):
        load_rubric_set(tmp_path / "missing.yaml")
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"- id: a\n  query: caf\xe9\n")
    with pytest.raises(RubricSetError, match="cannot read the file"):
        load_rubric_set(bad)


def test_entries_are_frozen_models() -> None:
    entry = RubricEntry(id="a", query="q", questions=[RubricQuestion(question="x?")])
    with pytest.raises(ValueError, match="frozen"):
        entry.id = "b"  # type: ignore[misc]
