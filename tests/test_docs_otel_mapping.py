"""docs/otel.md, "Mapping values: your roles to casewatch's", as written: the page's mapping,
run by ``casewatch map-check`` on the page's event, turns ``customer`` into ``user`` and ``bot``
into ``assistant``; a role the mapping leaves unmapped stops the event as the page says."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from monitor.cli import main

DOC = Path(__file__).resolve().parents[1] / "docs" / "otel.md"


def _section() -> str:
    text = DOC.read_text()
    start = text.index("### Mapping values: your roles to casewatch's\n")
    return text[start : text.index("\n## ", start + 1)]


def _files(tmp_path: Path, event: dict[str, object]) -> tuple[Path, Path]:
    (mapping,) = re.findall(r"```yaml\n(.*?)```", _section(), flags=re.DOTALL)
    config = tmp_path / "casewatch.yaml"
    config.write_text(mapping)
    events = tmp_path / "events.jsonl"
    events.write_text(json.dumps(event) + "\n")
    return config, events


def _event() -> dict[str, object]:
    (block,) = re.findall(r"```json\n(.*?)```", _section(), flags=re.DOTALL)
    event: dict[str, object] = json.loads(block)
    return event


def _map_check(config: Path, events: Path) -> tuple[int, list[str]]:
    result = CliRunner().invoke(main, ["map-check", "--config", str(config), str(events)])
    return result.exit_code, result.output.splitlines()


def test_the_page_maps_customer_to_user_and_bot_to_assistant(tmp_path: Path) -> None:
    code, lines = _map_check(*_files(tmp_path, _event()))
    assert code == 0, lines
    turn = json.loads(next(x for x in lines if x.startswith("line 1: ")).removeprefix("line 1: "))
    assert turn["history"] == [
        {"role": "user", "content": "My VPN drops every hour."},
        {"role": "assistant", "content": "Which client version do you run?"},
    ]
    assert turn["query"] == "4.1.2 on Windows 11. How do I fix it?"
    # The page states the history it gives.
    shown = re.search(r"The history becomes `(\[.*?\])`", _section(), flags=re.DOTALL)
    assert shown is not None and json.loads(shown.group(1).replace("\n", " ")) == turn["history"]


def test_a_role_left_unmapped_stops_the_event_naming_the_field(tmp_path: Path) -> None:
    event = _event()
    transcript = list(event["transcript"])  # type: ignore[call-overload]
    transcript[0] = {"from": "supervisor", "text": "Escalated."}
    code, lines = _map_check(*_files(tmp_path, {**event, "transcript": transcript}))
    assert code == 1
    (line,) = [x for x in lines if x.startswith("line 1: ")]
    assert "no turn (schema)" in line and "history" in line and "role" in line, line
