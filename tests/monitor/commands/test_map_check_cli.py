"""`casewatch map-check` and `casewatch run --file F --format mapped`: two event shapes become
turns, an event that cannot be mapped says which field, a bad expression is refused at start
naming its key."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from monitor.cli import main
from monitor.storage.audit import counts
from monitor.storage.store import Store
from monitor.stream.file_state import file_sidecars

MAPPING = {
    "event_id": "id",
    "conversation_id": "session.id || thread",
    "timestamp": "ts || created_at",
    "assistant.name": "'helpdesk'",
    "query": "(request.messages[?role=='user'] | [-1].text) || question",
    "answer": "response.text || reply",
    "contexts": "retrieval.docs[].{id: doc_id, text: body}",
}
NESTED = {
    "id": "e1",
    "session": {"id": "s1"},
    "ts": "2026-11-28T10:00:00Z",
    "request": {"messages": [{"role": "user", "text": "My VPN drops hourly"}]},
    "response": {"text": "Update the client to 4.2."},
    "retrieval": {"docs": [{"doc_id": "kb-7", "body": "Client 4.2 fixes hourly drops."}]},
}
FLAT = {
    "id": "e2",
    "thread": "t2",
    "created_at": "2026-11-28T10:05:00Z",
    "question": "Where is my invoice?",
    "reply": "Under Billing, Invoices.",
}
NO_ANSWER = {"id": "e3", "thread": "t3", "created_at": "2026-11-28T10:06:00Z", "question": "?"}


def _files(tmp_path: Path, mapping: dict[str, str]) -> tuple[Path, Path]:
    config = tmp_path / "casewatch.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "mapping": mapping,
                "storage": {"url": f"sqlite:///{tmp_path / 'mapped.db'}"},
                "sampling": {"default_rate": 1.0},
                "server": {"port": 0},
            }
        )
    )
    events = tmp_path / "events.jsonl"
    events.write_text("\n".join(json.dumps(e) for e in (NESTED, FLAT, NO_ANSWER)) + "\n")
    return config, events


def test_map_check_shows_each_turn_or_why_not(tmp_path: Path) -> None:
    config, events = _files(tmp_path, MAPPING)
    result = CliRunner().invoke(main, ["map-check", "--config", str(config), str(events)])
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.startswith(("line ", "2 of"))]
    first = json.loads(lines[0].removeprefix("line 1: "))
    assert (first["event_id"], first["query"], first["answer"]) == (
        "e1",
        "My VPN drops hourly",
        "Update the client to 4.2.",
    )
    assert first["contexts"] == [{"id": "kb-7", "text": "Client 4.2 fixes hourly drops."}]
    second = json.loads(lines[1].removeprefix("line 2: "))
    assert (second["conversation_id"], second["query"]) == ("t2", "Where is my invoice?")
    assert lines[2].startswith("line 3: no turn (mapping_unfilled): field 'answer'")
    assert lines[3] == "2 of 3 event(s) map to a turn"


def test_a_bad_expression_is_refused_naming_its_key(tmp_path: Path) -> None:
    config, events = _files(tmp_path, {**MAPPING, "answer": "response.["})
    result = CliRunner().invoke(main, ["map-check", "--config", str(config), str(events)])
    assert result.exit_code == 2
    assert "mapping.answer" in result.output and "JMESPath" in result.output
    run = CliRunner().invoke(
        main, ["run", "--config", str(config), "--file", str(events), "--format", "mapped"]
    )
    assert run.exit_code == 2
    assert "mapping.answer" in run.output


def test_run_reads_a_mapped_file(tmp_path: Path) -> None:
    config, events = _files(tmp_path, MAPPING)
    result = CliRunner().invoke(
        main, ["run", "--config", str(config), "--file", str(events), "--format", "mapped"]
    )
    assert result.exit_code == 0, result.output
    store = Store(f"sqlite:///{tmp_path / 'mapped.db'}")
    try:
        assert counts(store)["verdicts"] == 2
    finally:
        store.close()
    # Dead letters are kept with the store the file feeds, never beside the input.
    dlq_path, _ = file_sidecars(events, f"sqlite:///{tmp_path / 'mapped.db'}")
    dead = dlq_path.read_text()
    assert "mapping_unfilled" in dead
