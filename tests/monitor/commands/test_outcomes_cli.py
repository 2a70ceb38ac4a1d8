"""``casewatch outcomes import`` and ``casewatch schema --event outcome`` through click, and
``casewatch inspect turn`` showing the feedback beside the verdicts."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from monitor.cli import main
from monitor.storage.store import Store
from tests.fixtures.turns import seed_mixed

LINES = [
    # h-bad is severe, h-ok-1 none (tests/fixtures/turns.py seed_mixed).
    {
        "outcome_id": "f-1",
        "kind": "feedback",
        "assistant": "helpdesk",
        "timestamp": "2026-03-01T12:10:00Z",
        "turn_event_id": "h-bad",
        "thumbs": "down",
        "comment": "Wrong error code. Mail me at jo.smith@example.com",
    },
    {
        "outcome_id": "f-2",
        "kind": "feedback",
        "assistant": "helpdesk",
        "timestamp": "2026-03-01T12:11:00Z",
        "turn_event_id": "h-ok-1",
        "rating": {"value": 1, "scale_min": 1, "scale_max": 5},
    },
    {
        "outcome_id": "c-1",
        "kind": "reopened",
        "assistant": "helpdesk",
        "timestamp": "2026-03-01T12:12:00Z",
        "conversation_id": "conv-h-bad",
    },
    {
        "outcome_id": "f-3",
        "kind": "feedback",
        "assistant": "helpdesk",
        "timestamp": "2026-03-01T12:13:00Z",
        "turn_event_id": "never-stored",
        "thumbs": "up",
    },
]


def write_lines(path: Path, extra: list[bytes]) -> Path:
    body = b"".join(json.dumps(line).encode() + b"\n" for line in LINES)
    path.write_bytes(body + b"".join(line + b"\n" for line in extra))
    return path


def test_import_stores_once_dead_letters_bad_lines_and_inspect_shows_the_feedback(
    runner: CliRunner, store: Store, tmp_path: Path
) -> None:
    seed_mixed(store)
    out_of_scale = json.dumps({**LINES[1], "outcome_id": "f-9", "rating": {"value": 7}}).encode()
    path = write_lines(
        tmp_path / "outcomes.jsonl", [b"{oops", out_of_scale, json.dumps(LINES[0]).encode()]
    )
    dlq = tmp_path / "bad.jsonl"
    result = runner.invoke(
        main, ["outcomes", "import", str(path), "--db", store.url, "--dead-letters", str(dlq)]
    )
    assert result.exit_code == 1, result.output
    assert (
        "4 outcome event(s) stored (3 joined to a stored turn or case), 1 already stored, "
        "2 dead-lettered" in result.output
    )
    letters = [json.loads(line) for line in dlq.read_text().splitlines()]
    assert [(d["reason"], d["offset"]) for d in letters] == [("not_json", 4), ("out_of_scale", 5)]
    # Again: everything is a duplicate, nothing new.
    again = runner.invoke(
        main, ["outcomes", "import", str(path), "--db", store.url, "--dead-letters", str(dlq)]
    )
    assert "0 outcome event(s) stored (0 joined to a stored turn or case), 5 already stored" in (
        again.output
    )

    shown = runner.invoke(main, ["inspect", "turn", "h-bad", "--db", store.url, "--json"])
    assert shown.exit_code == 0, shown.output
    outcomes = json.loads(shown.output)["outcomes"]
    assert [(o["outcome_id"], o["kind"], o["agreement"]) for o in outcomes] == [
        ("f-1", "feedback", "agree_unhappy"),
        ("c-1", "reopened", None),
    ]
    # The comment was redacted like turns are before it was stored.
    assert "jo.smith@example.com" not in outcomes[0]["comment"]
    assert outcomes[0]["comment"].startswith("Wrong error code. Mail me at ")
    text = runner.invoke(main, ["inspect", "turn", "h-ok-1", "--db", store.url]).output
    assert "what the customer said (1)" in text
    assert "feedback rating 1 on 1..5 (negative); against the judge: judge_blind" in text


def test_the_example_outcomes_import_as_the_docs_say(runner: CliRunner, tmp_path: Path) -> None:
    db = tmp_path / "outcomes-demo.db"
    assert runner.invoke(main, ["db", "upgrade", "--db", str(db)]).exit_code == 0
    example = Path(__file__).resolve().parents[3] / "examples" / "outcomes.jsonl"
    result = runner.invoke(
        main,
        [
            "outcomes",
            "import",
            str(example),
            "--db",
            str(db),
            "--dead-letters",
            str(tmp_path / "dlq.jsonl"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert (
        "7 outcome event(s) stored (0 joined to a stored turn or case), 1 already stored, "
        "0 dead-lettered" in result.output
    )


def test_schema_prints_the_outcome_event(runner: CliRunner) -> None:
    result = runner.invoke(main, ["schema", "--event", "outcome"])
    assert result.exit_code == 0
    doc = json.loads(result.output)
    assert doc["title"] == "casewatch OutcomeEvent v1"
    assert json.loads(runner.invoke(main, ["schema"]).output)["title"] == "casewatch TurnEvent v1"
