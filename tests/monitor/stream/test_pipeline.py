"""``build_pipeline``: one set of turn decisions for the steps and the screening processes.

Screening never changes an outcome, on a ``format: mapped`` topic too: the screening processes
decode each record with the topic's mapping, as the decode step does, not as casewatch's own
turn event (which a mapped record may also happen to be, with other values).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from monitor.config.settings import load_settings
from tests.fixtures.databases import make_turn
from tests.support.file_runs import outcome_of_a_file_run

# The file source reads its lines as the records of topic ``file``.
MAPPING = {
    "event_id": "event_id",
    "conversation_id": "thread",
    "timestamp": "timestamp",
    "assistant.name": "bot",
    "query": "query",
    "answer": "answer",
    "feedback": "review",
}
NEGATIVE = {"name": "negative", "field": "feedback", "equals": "negative"}


def _record(i: int, *, negative: bool, native: bool = True) -> bytes:
    """A mapped record. ``native``: it is also a valid casewatch turn event, whose own
    assistant, conversation and (absent) feedback are not the mapping's."""
    doc: dict[str, Any] = json.loads(make_turn(f"m{i}").model_dump_json())
    doc |= {"thread": f"thread-{i}", "bot": "mapped-bot"}
    if negative:
        doc["review"] = {"rating": "negative"}
    if not native:
        del doc["conversation_id"]
    return json.dumps(doc).encode()


def _run(tmp_path: Path, data: Path, name: str, screen_processes: int) -> dict[str, object]:
    url = f"sqlite:///{tmp_path / f'{name}.sqlite'}"
    settings = load_settings(
        None,
        storage={"url": url},
        server={"port": 0},
        kafka={"topics": [{"name": "file", "format": "mapped"}]},
        mapping=MAPPING,
        sampling={"default_rate": 0.0, "always_judge": [NEGATIVE]},
        daemon={"screen_processes": screen_processes},
    )
    return outcome_of_a_file_run(settings, data, tmp_path / f"{name}.jsonl")


def test_screening_changes_no_outcome_on_a_mapped_topic(tmp_path: Path) -> None:
    """Records that are valid turn events as they are, but whose mapped turn has negative
    feedback (a rule samples it) and another assistant: decided on the unmapped turn, they
    would be finished unjudged by screening, and counted under the wrong assistant."""
    lines = [_record(i, negative=i % 3 == 0, native=i % 5 != 0) for i in range(30)]
    lines += [b"{oops", b'{"event_id": "no-rest"}']  # poison either way
    data = tmp_path / "mapped.jsonl"
    data.write_bytes(b"\n".join(lines) + b"\n")
    inline = _run(tmp_path, data, "inline", 0)
    screened = _run(tmp_path, data, "screened", 1)
    assert screened == inline
    # Not a vacuous comparison: every negative record judged, the others finished unjudged
    # under the mapped assistant, and the poison dead-lettered.
    assert inline["stored"] == sorted(f"m{i}" for i in range(30) if i % 3 == 0)
    assert inline["dead"] == ["mapping_unfilled", "not_json"]
    counters = inline["counters"]
    assert isinstance(counters, dict)
    skipped = ("assistant", "mapped-bot"), ("reason", "not_sampled")
    assert counters[("casewatch_turns_skipped", skipped)] == 20
