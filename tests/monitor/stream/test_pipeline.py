"""``build_pipeline``: one set of turn decisions for the steps and the screening processes.

Screening never changes an outcome, on a ``format: mapped`` topic too: the screening processes
decode each record with the topic's mapping, as the decode step does, not as casewatch's own
turn event (which a mapped record may also happen to be, with other values).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from monitor.config.settings import load_settings
from monitor.storage.store import Store
from monitor.storage.tables import turns
from tests.fixtures.databases import make_turn
from tests.support.file_runs import outcome_of_a_file_run

ROOT = Path(__file__).resolve().parents[3]

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


def _cascade_run(tmp_path: Path, data: Path, name: str, screen_processes: int) -> dict[str, object]:
    url = f"sqlite:///{tmp_path / f'{name}.sqlite'}"
    settings = load_settings(
        None,
        storage={"url": url},
        server={"port": 0},
        sampling={
            "strategy": "cascade",
            "always_judge": [NEGATIVE],
            "cascade_look_share": 0.5,
            # Every looked-at turn at the look share's probability, whatever the pairs the
            # judge's verdicts add meanwhile (they arrive when they arrive).
            "cascade_target_calls_per_hour": 1e9,
            "budget_calls_per_hour": None,
        },
        daemon={"screen_processes": screen_processes},
    )
    outcome = outcome_of_a_file_run(settings, data, tmp_path / f"{name}.jsonl")
    store = Store(url)
    try:
        with store.transaction(write=False) as conn:
            query = sa.select(turns.c.event_id, turns.c.inclusion_probability, turns.c.cheap_cell)
            outcome["draws"] = sorted(tuple(row) for row in conn.execute(query))
    finally:
        store.close()
    return outcome


def test_the_daemon_under_the_cascade_decides_the_same_with_screening_processes(
    tmp_path: Path,
) -> None:
    """``casewatch run`` on the example turns under the cascade: with a screening process (which
    takes the cheap look and finishes the turns beyond the look share) the same turns are
    stored, each with the probability and the cheap cell it was drawn with, and the same
    turns are counted, as without one."""
    data = ROOT / "examples" / "turns.jsonl"
    inline = _cascade_run(tmp_path, data, "inline", 0)
    screened = _cascade_run(tmp_path, data, "screened", 1)
    assert screened == inline
    draws = inline["draws"]
    assert isinstance(draws, list)
    # Not a vacuous comparison: turns drawn by their cell at the look share, by a rule at 1,
    # every cell stored, and turns beyond the share finished unjudged.
    assert {p for _, p, _ in draws} == {0.5, 1.0}
    assert {c for _, _, c in draws} == {"severe", "moderate", "minor", "none"}
    counters = inline["counters"]
    assert isinstance(counters, dict)
    reasons = {dict(labels)["reason"] for (name, labels) in counters if "reason" in dict(labels)}
    assert {"cascade", "rule:negative", "rule:identifier_tripwire", "not_sampled"} <= reasons
