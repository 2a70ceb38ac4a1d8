"""The outcome step on a real SQLite store: other topics pass on, outcomes are stored once and
finished, poison is dead-lettered with its reason, and a database that cannot take them keeps
them uncommitted and retried until it can."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from consumers.dlq import FileDeadLetterSink
from consumers.records import TopicPartition
from monitor.runtime.clock import ManualClock
from monitor.schema.outcome import decode_outcome
from monitor.storage.outcomes import OutcomeRecords
from monitor.storage.store import Store
from monitor.stream.pipeline import OutcomeIntake, outcome_step
from tests.monitor.stream.steps.helpers import Recorder, env, raw

OUTCOMES = TopicPartition("support.outcomes", 0)


class Counts:
    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def _add(self, key: str, n: int = 1) -> None:
        self.seen[key] = self.seen.get(key, 0) + n

    def record_dead_letter(self, reason: str) -> None:
        self._add(f"dead:{reason}")

    def record_dead_letter_held(self, why: str) -> None:
        self._add(f"held:{why}")

    def record_storage_error(self) -> None:
        self._add("storage_error")

    def record_outcome(self, assistant: str, kind: str, *, joined: bool) -> None:
        self._add(f"{kind}:{'joined' if joined else 'pending'}")

    def record_duplicates(self, count: int) -> None:
        self._add("duplicate", count)

    def record_comment_dropped(self) -> None:
        self._add("comment_dropped")


def feedback(outcome_id: str, **extra: Any) -> bytes:
    doc = {
        "outcome_id": outcome_id,
        "kind": "feedback",
        "assistant": "helpdesk",
        "timestamp": "2026-03-01T12:00:00Z",
        "turn_event_id": "evt-1",
        "thumbs": "down",
        **extra,
    }
    return json.dumps(doc).encode()


def test_a_database_that_cannot_take_outcomes_keeps_them_uncommitted_until_it_can(
    tmp_path: Path,
) -> None:
    store = Store(f"sqlite:///{tmp_path / 'outcomes.db'}")  # not migrated yet: no table
    clock = ManualClock()
    counts, done, turns = Counts(), Recorder(), Recorder()
    sink = FileDeadLetterSink(tmp_path / "dlq.jsonl")
    step = outcome_step(
        turns,
        done,
        sink,
        OutcomeIntake(OutcomeRecords(store, clock), counts),
        counts,
        {OUTCOMES.topic: decode_outcome},
        max_bytes=1 << 20,
        max_buffered=10,
        redactor=None,
        clock=clock,
    )
    try:
        step.submit(env(raw(b'{"event_id": "a turn"}'), offset=0))  # another topic: passed on
        step.submit(env(raw(feedback("f-1"), 0, OUTCOMES), 0, OUTCOMES))
        step.submit(env(raw(feedback("f-1"), 1, OUTCOMES), 1, OUTCOMES))  # sent twice
        step.submit(env(raw(feedback("f-2", rating={"value": 9}), 2, OUTCOMES), 2, OUTCOMES))
        step.poll()
        assert turns.offsets == [0]
        assert counts.seen["storage_error"] == 1
        sink.flush(5.0)
        step.poll()
        # The dead letter is finished (the file sink acknowledged it); the outcomes are not
        # while the database refuses them.
        assert done.offsets == [2]
        assert step.buffered == 2
        store.migrate()
        clock.advance(1.0)  # past the retry's backoff, on the step's clock
        step.poll()
        assert sorted(done.offsets) == [0, 1, 2]
        assert counts.seen["feedback_negative:pending"] == 1
        assert counts.seen["duplicate"] == 1
        assert counts.seen["dead:out_of_scale"] == 1
        letters = [json.loads(line) for line in (tmp_path / "dlq.jsonl").read_text().splitlines()]
        assert [(d["reason"], d["offset"]) for d in letters] == [("out_of_scale", 2)]
        assert [r["outcome_id"] for r in OutcomeRecords(store).for_turn("evt-1")] == ["f-1"]
    finally:
        step.close()
        sink.close()
        store.close()
