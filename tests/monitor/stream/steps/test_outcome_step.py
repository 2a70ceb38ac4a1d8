"""The outcome step on a real SQLite store: other topics pass on, outcomes are stored once and
finished, poison is dead-lettered with its reason, and a database that cannot take them keeps
them uncommitted and retried until it can."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from consumers.dlq import FileDeadLetterSink
from consumers.records import TopicPartition
from monitor.errors import StorageError
from monitor.runtime.clock import ManualClock
from monitor.schema.outcome import decode_outcome
from monitor.storage.outcomes import OutcomeRecords
from monitor.storage.store import Store
from monitor.stream.pipeline import OutcomeIntake, outcome_step
from monitor.stream.steps.outcomes import MAX_HOLD_S, OutcomeStep
from tests.monitor.stream.steps.helpers import Recorder, env, raw
from tests.support.waiting import wait_for

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

    def record_outcomes(self, counts: Mapping[tuple[str, str], int], *, joined: int) -> None:
        for (_, kind), n in counts.items():
            self._add(kind, n)
        self._add("joined", joined)

    def record_duplicates(self, count: int) -> None:
        self._add("duplicate", count)

    def record_comment_dropped(self) -> None:
        self._add("comment_dropped")


def settle(step: OutcomeStep) -> None:
    """Poll, and poll again until the write that poll handed to the writer thread (if any)
    is collected."""
    step.poll()
    wait_for(lambda: (step.poll(), not step.writing)[1], what="the outcome write collected")


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
        settle(step)
        assert turns.offsets == [0]
        assert counts.seen["storage_error"] == 1
        sink.flush(5.0)
        settle(step)
        # The dead letter is finished (the file sink acknowledged it); the outcomes are not
        # while the database refuses them.
        assert done.offsets == [2]
        assert step.buffered == 2
        store.migrate()
        clock.advance(1.0)  # past the retry's backoff, on the step's clock
        settle(step)
        assert sorted(done.offsets) == [0, 1, 2]
        assert counts.seen["feedback_negative"] == 1
        assert counts.seen["joined"] == 0  # its turn is not stored
        assert counts.seen["duplicate"] == 1
        assert counts.seen["dead:out_of_scale"] == 1
        letters = [json.loads(line) for line in (tmp_path / "dlq.jsonl").read_text().splitlines()]
        assert [(d["reason"], d["offset"]) for d in letters] == [("out_of_scale", 2)]
        assert [r["outcome_id"] for r in OutcomeRecords(store).for_turn("evt-1")] == ["f-1"]
    finally:
        step.close()
        sink.close()
        store.close()


class GatedWriter:
    """The store's writer; once ``armed``, its writes are held at the gate: ``crash`` makes the
    held write fail as a process dying before its transaction commits; ``open`` lets it
    store."""

    def __init__(self, records: OutcomeRecords, *, armed: bool = True) -> None:
        self._records = records
        self.armed = armed
        self.held = threading.Event()
        self._go = threading.Event()
        self._store = True

    def save(self, items: Any) -> Any:
        if not self.armed:
            return self._records.save(items)
        self.held.set()
        self._go.wait(30)
        if not self._store:
            raise StorageError("the process died before the transaction committed")
        return self._records.save(items)

    def crash(self) -> None:
        self._store = False
        self._go.set()

    def open(self) -> None:
        self._go.set()


def test_a_crash_between_batches_commits_nothing_unstored_and_a_restart_stores_each_once(
    tmp_path: Path,
) -> None:
    store = Store(f"sqlite:///{tmp_path / 'outcomes.db'}")
    store.migrate()
    records = OutcomeRecords(store)
    sink = FileDeadLetterSink(tmp_path / "dlq.jsonl")
    lines = [feedback("f-1"), feedback("f-2"), feedback("f-3"), feedback("f-2"), feedback("f-4")]

    def run(writer: Any, start: int, stop: int) -> tuple[OutcomeStep, Recorder, Counts]:
        # A manual clock: an event is held for a batch however slowly the test runs.
        counts, done = Counts(), Recorder()
        step = outcome_step(
            Recorder(),
            done,
            sink,
            OutcomeIntake(writer, counts),
            counts,
            {OUTCOMES.topic: decode_outcome},
            max_bytes=1 << 20,
            max_buffered=10,
            redactor=None,
            clock=ManualClock(),
        )
        for offset in range(start, stop):
            step.submit(env(raw(lines[offset], offset, OUTCOMES), offset, OUTCOMES))
        return step, done, counts

    def stored() -> list[str]:
        return sorted(r["outcome_id"] for e in ("evt-1",) for r in records.for_turn(e))

    # First run: the first batch is stored and committed; the second dies mid-write.
    gated = GatedWriter(records, armed=False)
    step, done, _ = run(gated, 0, 2)
    settle(step)
    assert done.offsets == [0, 1]
    gated.armed = True  # the same step, its next write held
    for offset in (2, 3):
        step.submit(env(raw(lines[offset], offset, OUTCOMES), offset, OUTCOMES))
    step.poll()  # events came since the last poll: held for a fuller batch
    assert not step.writing
    step.poll()  # none since: written
    assert gated.held.wait(10)
    gated.crash()
    wait_for(lambda: (step.poll(), not step.writing)[1], what="the failed write collected")
    step.close()  # the process is gone: nothing of the second batch was committed
    assert done.offsets == [0, 1]
    assert stored() == ["f-1", "f-2"]

    # Second run, from the last commit (offset 2): its write is stored, then the process dies
    # before the result is collected, so the offsets are not committed either.
    gated = GatedWriter(records)
    step, done, _ = run(gated, 2, 5)
    step.poll()
    step.poll()
    assert gated.held.wait(10)
    gated.open()
    wait_for(lambda: stored() == ["f-1", "f-2", "f-3", "f-4"], what="the batch stored")
    step.close()
    assert done.offsets == []

    # Third run, from offset 2 again: everything finished, each outcome stored once.
    step, done, counts = run(records, 2, 5)
    settle(step)
    step.close()
    assert sorted(done.offsets) == [2, 3, 4]
    assert counts.seen == {"duplicate": 3}
    assert stored() == ["f-1", "f-2", "f-3", "f-4"]
    sink.close()
    store.close()


def test_a_write_waits_for_a_batch_while_events_keep_coming(tmp_path: Path) -> None:
    """Each write costs a transaction whatever it holds, so while polls keep bringing events a
    write waits for a batch (half of ``max_buffered`` here), or until its oldest event has
    waited ``MAX_HOLD_S``; a poll that brought none writes what there is."""
    store = Store(f"sqlite:///{tmp_path / 'outcomes.db'}")
    store.migrate()
    clock = ManualClock()
    counts, done = Counts(), Recorder()
    sink = FileDeadLetterSink(tmp_path / "dlq.jsonl")
    step = outcome_step(
        Recorder(),
        done,
        sink,
        OutcomeIntake(OutcomeRecords(store), counts),
        counts,
        {OUTCOMES.topic: decode_outcome},
        max_bytes=1 << 20,
        max_buffered=10,
        redactor=None,
        clock=clock,
    )
    try:
        step.submit(env(raw(feedback("f-0"), 0, OUTCOMES), 0, OUTCOMES))
        step.poll()
        assert not step.writing and step.buffered == 1  # more may come: held
        for offset in range(1, 5):
            step.submit(env(raw(feedback(f"f-{offset}"), offset, OUTCOMES), offset, OUTCOMES))
        step.poll()
        assert step.writing  # a batch (5) waits: written although events keep coming
        settle(step)
        assert sorted(done.offsets) == [0, 1, 2, 3, 4]
        step.submit(env(raw(feedback("f-5"), 5, OUTCOMES), 5, OUTCOMES))
        step.poll()
        assert not step.writing
        settle(step)  # a poll that brought nothing writes the one waiting
        assert sorted(done.offsets) == [0, 1, 2, 3, 4, 5]
        # A trickle at every poll, short of a batch: written once the oldest has waited.
        step.submit(env(raw(feedback("f-6"), 6, OUTCOMES), 6, OUTCOMES))
        step.poll()
        assert not step.writing
        clock.advance(MAX_HOLD_S)
        step.submit(env(raw(feedback("f-7"), 7, OUTCOMES), 7, OUTCOMES))
        step.poll()
        assert step.writing  # events keep coming, but f-6 has waited long enough
        settle(step)
        assert sorted(done.offsets) == list(range(8))
        assert counts.seen["feedback_negative"] == 8
    finally:
        step.close()
        sink.close()
        store.close()
