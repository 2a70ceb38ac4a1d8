"""The demo's example turns: found, read, and replayed loop after loop (pure, no broker)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from consumers.decode import decode_value
from monitor.demo.examples import MALFORMED, demo_messages, find_examples, load_examples
from monitor.errors import DemoError, InvalidEvent
from monitor.schema.turn import TurnEvent

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "turns.jsonl"


def test_examples_are_found_from_any_working_directory(tmp_path: Path) -> None:
    assert find_examples(cwd=tmp_path) == EXAMPLES  # falls back to the checkout
    local = tmp_path / "examples" / "turns.jsonl"
    local.parent.mkdir()
    local.write_text('{"event_id": "e1"}\n')
    assert find_examples(cwd=tmp_path) == local


def test_a_missing_or_bad_examples_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DemoError, match="does not exist"):
        find_examples(tmp_path / "nope.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"event_id": "e1"}\n[1]\n')
    with pytest.raises(DemoError, match=r"bad.jsonl:2: not a turn event"):
        load_examples(bad)


def test_a_loop_renames_events_refreshes_timestamps_and_spreads_poison() -> None:
    docs = load_examples(EXAMPLES)
    now = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    out = list(demo_messages(docs, 3, lambda: now))
    assert len(out) == len(docs) + len(MALFORMED)
    good: list[tuple[bytes | None, TurnEvent]] = []
    bad: list[int] = []
    for i, (key, value) in enumerate(out):
        try:
            good.append((key, decode_value(value, 1 << 20)))
        except InvalidEvent:
            bad.append(i)
    assert [e.event_id for _, e in good] == [f"{d['event_id']}#3" for d in docs]
    assert {e.timestamp for _, e in good} == {now}
    assert all(key == e.conversation_id.encode() for key, e in good)
    # Poison is spread through the loop, not bunched at one end.
    assert len(bad) == len(MALFORMED) and bad[0] > 0 and bad[-1] < len(out) - 1


def test_a_short_file_still_gets_every_malformed_record() -> None:
    docs = [{"event_id": "e1", "conversation_id": "c1"}]
    out = list(demo_messages(docs, 0, lambda: datetime(2030, 1, 1, tzinfo=UTC)))
    assert [v for k, v in out if k is None] == list(MALFORMED)
