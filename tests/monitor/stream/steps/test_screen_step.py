"""Screening in worker processes (real forkserver processes): it never changes an outcome.

What happens to each kind of record: a valid turn that no rule, rate or tripwire selects is
finished by screening and counted ``not_sampled``; everything else (invalid bytes, oversized,
a rule, the rate, a tripwire hit) goes on unchanged to the in-process decode and sample steps,
which dead-letter or sample it as they do without screening. A failed screening process hands
its batch on whole. With unsampled turns kept for feedback, the turns screening finishes come
back as their kept rows, redacted in the process.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from prometheus_client import CollectorRegistry

from consumers.records import RawMessage, TopicPartition
from monitor.config.sampling import AlwaysJudgeRule, SamplingConfig
from monitor.errors import MessageRejected
from monitor.metrics.exporter import Metrics
from monitor.redaction.config import RedactionConfig
from monitor.schema.turn import TurnEvent
from monitor.storage.retained_turns import RetainedTurns
from monitor.storage.store import Store
from monitor.storage.tables import retained_turns
from monitor.stream.recorder import StreamRecorder
from monitor.stream.steps import screen
from monitor.stream.steps.base import Envelope
from monitor.stream.steps.retain import RetainingDone
from monitor.stream.steps.screen import ScreenStep
from tests.fixtures.databases import make_turn
from tests.monitor.judging.heuristic.tripwire_corpus import turn as tripwire_turn
from tests.monitor.stream.steps.helpers import (
    TP,
    Recorder,
    chain_decisions,
    env,
    part_by_part,
    raw,
)
from tests.support.waiting import DEADLINE_S, wait_for

MAX_BYTES = 1 << 20
NEGATIVE = AlwaysJudgeRule(name="negative", field="feedback", equals="negative")
SAMPLING = SamplingConfig(default_rate=0.0, always_judge=[NEGATIVE])


def submit_all(step: ScreenStep, messages: list[Envelope[RawMessage]]) -> None:
    """As the daemon offers records: a refused one is offered again after a poll."""
    deadline = time.monotonic() + DEADLINE_S
    for m in messages:
        while True:
            try:
                step.submit(m)
                break
            except MessageRejected:
                assert time.monotonic() < deadline, "screening never took the record"
                step.poll()
                time.sleep(0.01)


def value(event_id: str, **extra: Any) -> bytes:
    return make_turn(event_id, **extra).model_dump_json().encode()


TRIPPED = tripwire_turn("Open outbound TCP 9434 to cache.foundry.example.").model_dump_json()

# (value, screened out?) for each kind of record.
KINDS: list[tuple[bytes | None, bool]] = [
    (value("plain"), True),  # valid, not sampled: finished by screening
    (b"{not json", False),  # dead-lettered downstream as not_json
    (b'{"event_id": "x"}', False),  # schema
    (b"", False),  # empty
    (None, False),  # no value at all
    (b"\xff\xfe", False),  # bad_utf8
    (b"x" * (MAX_BYTES + 1), False),  # too_large
    (value("rule", feedback={"rating": "negative"}), False),  # a configured rule selects it
    (TRIPPED.encode(), False),  # the tripwire trips: sampled with its reason downstream
    (value("other", assistant="billing"), True),
]


def test_the_screener_finishes_only_valid_unsampled_clean_turns() -> None:
    screener = chain_decisions(SAMPLING)
    marks = [screener.finishes_unjudged(TP.topic, v) for v, _ in KINDS]
    assert [m is not None for m in marks] == [out for _, out in KINDS]
    assert marks[0] == "helpdesk" and marks[-1] == "billing"
    # A sampling rate of 1 selects everything; no tripwire means a near miss is not looked for.
    assert (
        chain_decisions(SamplingConfig(default_rate=1.0)).finishes_unjudged(
            TP.topic, value("plain")
        )
        is None
    )
    off = SamplingConfig(default_rate=0.0, identifier_tripwire=False)
    assert chain_decisions(off).finishes_unjudged(TP.topic, TRIPPED.encode()) == "a"


def test_the_screener_hands_on_what_the_redact_step_would_skip() -> None:
    """Judged raw but stored redacted (``before_judging: false``): the redact step skips a turn
    too large to redact (``redaction_too_large``), so screening must not finish it as not
    sampled; it runs the redact step's own decision."""
    big = value("big", answer="Open UDP 500. " * 20)
    sampling = SamplingConfig(default_rate=0.0)
    small_bound = RedactionConfig(before_judging=False, max_chars=200)
    assert chain_decisions(sampling, small_bound).finishes_unjudged(TP.topic, big) is None
    assert chain_decisions(sampling, RedactionConfig(before_judging=False)).finishes_unjudged(
        TP.topic, big
    ) == ("helpdesk")


def test_a_batch_is_marked_as_the_steps_decide_each_record(monkeypatch: Any) -> None:
    """What a screening process runs over a batch (``_screen``, called here in this process
    after its initializer): the values alone, as the step sends them when no topic has a
    decoder of its own; with keeping on, each finished turn with its kept row."""
    values = [v for v, _ in KINDS] + [value("big", answer="Open UDP 500. " * 20)]
    # The process's state, as it was before (no screening process is this one).
    monkeypatch.setattr(screen, "_decisions", None)
    monkeypatch.setattr(screen, "_keeping", False)
    for redaction in (None, RedactionConfig(before_judging=False, max_chars=200)):
        decisions = chain_decisions(SAMPLING, redaction)
        expected = [part_by_part(decisions, TP.topic, v) for v in values]
        names = [None if turn is None else turn.assistant.name for turn in expected]
        screen._start_process(decisions)
        assert screen._screen(values) == names
        assert screen._screen(values, [TP.topic] * len(values)) == names
        screen._start_process(decisions, keeping=True)
        rows = [None if t is None else (t.assistant.name, decisions.kept_row(t)) for t in expected]
        assert screen._screen(values) == rows
    # The plain turn, the other assistant's; the big one only when it can be redacted.
    assert names[0] == "helpdesk" and names[-2] == "billing" and names[-1] is None


@pytest.fixture
def make_step() -> Iterator[Callable[..., tuple[ScreenStep, Recorder, Recorder, StreamRecorder]]]:
    steps: list[ScreenStep] = []

    def make(
        capacity: int | None = None, batch_size: int = 4, batch_max_bytes: int = MAX_BYTES
    ) -> tuple[ScreenStep, Recorder, Recorder, StreamRecorder]:
        nxt, done = Recorder(capacity), Recorder()
        metrics = StreamRecorder(Metrics(CollectorRegistry()))
        step = ScreenStep(
            nxt,
            done,
            metrics,
            processes=1,
            decisions=chain_decisions(SAMPLING),
            batch_size=batch_size,
            batch_max_bytes=batch_max_bytes,
        )
        steps.append(step)
        return step, nxt, done, metrics

    yield make
    for step in steps:
        step.close()


def records(values: list[bytes | None], tp: TopicPartition = TP) -> list[Envelope[RawMessage]]:
    return [env(raw(v, offset=i, tp=tp), offset=i, tp=tp) for i, v in enumerate(values)]


def test_each_record_is_finished_here_or_handed_on_unchanged_in_order(make_step: Any) -> None:
    step, nxt, done, _ = make_step()
    messages = records([v for v, _ in KINDS] * 3)
    submit_all(step, messages)
    wait_for(
        lambda: len(nxt.items) + len(done.items) == len(messages),
        "screening to finish",
        tick=step.poll,
    )
    expected_done = [i for i, (_, out) in enumerate(KINDS * 3) if out]
    assert done.offsets == expected_done
    assert nxt.offsets == [i for i in range(len(messages)) if i not in expected_done]
    assert all(a is b for a, b in zip(nxt.items, [messages[i] for i in nxt.offsets], strict=True))
    assert step.fallbacks == 0


def test_the_processes_start_at_the_first_poll_not_with_the_first_batch(make_step: Any) -> None:
    # A process's start (its initializer's imports) falls in the loop's first polls, during
    # the group join, instead of delaying the first batch's marks.
    step, _, done, _ = make_step()
    assert step._pool is None
    step.poll()
    assert step._pool is not None
    pool = step._pool
    wait_for(
        lambda: any(p.is_alive() for p in list((pool._processes or {}).values())),
        "the screening process to start",
    )
    submit_all(step, records([value("first")]))
    wait_for(lambda: done.offsets == [0], "screening to finish", tick=step.poll)
    assert step._pool is pool and step.fallbacks == 0  # the same pool screens the batches


def test_a_batch_goes_out_at_its_byte_bound_whatever_its_count(make_step: Any) -> None:
    # With large records the byte bound, not the count, limits what is in flight here.
    step, _, done, _ = make_step(batch_size=100, batch_max_bytes=1)
    messages = records([value(f"b{i}") for i in range(3)])
    for m in messages:
        step.submit(m)
    assert len(step._flight) == 2 and len(step._batch) == 1  # one record a batch
    wait_for(lambda: done.offsets == [0, 1, 2], "screening to finish", tick=step.poll)


def test_counts_are_those_of_the_sample_step() -> None:
    registry = CollectorRegistry()
    nxt, done = Recorder(), Recorder()
    step = ScreenStep(
        nxt,
        done,
        StreamRecorder(Metrics(registry)),
        processes=1,
        decisions=chain_decisions(SAMPLING),
    )
    try:
        for m in records([value("a1"), value("a2"), value("b1", assistant="billing")]):
            step.submit(m)
        wait_for(lambda: len(done.items) == 3, "screening to finish", tick=step.poll)
        step.poll()
    finally:
        step.close()
    get = registry.get_sample_value
    skipped = "casewatch_turns_skipped_total"
    assert get(skipped, {"assistant": "helpdesk", "reason": "not_sampled"}) == 2
    assert get(skipped, {"assistant": "billing", "reason": "not_sampled"}) == 1
    assert get("casewatch_tripwire_checked_total", {"assistant": "helpdesk"}) == 2


def test_a_refusing_next_step_is_backpressure(make_step: Any) -> None:
    step, nxt, done, _ = make_step(capacity=0)
    for m in records([b"bad 1", b"bad 2"]):
        step.submit(m)
    wait_for(lambda: step._ready and not step._flight, "screening to finish", tick=step.poll)
    with pytest.raises(MessageRejected):
        step.submit(records([value("later")])[0])
    nxt.capacity = None
    step.poll()
    assert nxt.offsets == [0, 1]
    step.submit(env(raw(value("later"), offset=2), offset=2))
    wait_for(lambda: done.offsets == [2], "screening to finish", tick=step.poll)


def test_a_dead_screening_process_hands_its_batch_on_and_the_pool_comes_back(
    make_step: Any,
) -> None:
    step, nxt, done, _ = make_step(batch_size=2)
    first = records([value("p1"), value("p2")])
    for m in first:
        step.submit(m)
    wait_for(lambda: len(done.items) == 2, "screening to finish", tick=step.poll)
    assert step._pool is not None
    for pid in list(step._pool._processes):  # the pool's own processes: what a crash kills
        os.kill(pid, signal.SIGKILL)
    submit_all(step, [env(raw(value(f"q{i}"), offset=i), offset=i) for i in range(2, 8)])
    wait_for(lambda: len(nxt.items) + len(done.items) == 8, "screening to finish", tick=step.poll)
    assert step.fallbacks >= 1
    # Handed on, not lost: the in-process steps decide for them. Later batches screen again.
    assert sorted(nxt.offsets + done.offsets) == list(range(8))
    submit_all(step, [env(raw(value(f"r{i}"), offset=i), offset=i) for i in range(8, 10)])
    wait_for(lambda: 8 in done.offsets and 9 in done.offsets, "screening to finish", tick=step.poll)


def test_finish_and_discard_leave_nothing_of_a_revoked_partition_in_flight(make_step: Any) -> None:
    step, nxt, done, _ = make_step(batch_size=100)
    other = TopicPartition("turns", 1)
    for m in records([value("a"), b"bad"]) + records([value("b"), b"bad"], tp=other):
        step.submit(m)
    step.discard([other])
    step.finish(DEADLINE_S)
    assert [(m.tp, m.offset) for m in done.items] == [(TP, 0)]
    assert [(m.tp, m.offset) for m in nxt.items] == [(TP, 1)]
    assert not step._flight and not step._batch


def test_join_hands_on_everything_then_joins_the_next_step(make_step: Any) -> None:
    step, nxt, done, _ = make_step(batch_size=100)
    for m in records([value("a"), b"bad", value("b")]):
        step.submit(m)
    step.join(DEADLINE_S)
    assert done.offsets == [0, 2] and nxt.offsets == [1]
    assert nxt.joins and nxt.joins[-1] is not None


def test_screening_that_cannot_start_is_switched_off_and_nothing_is_lost(
    make_step: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    step, nxt, done, _ = make_step(batch_size=2)

    def cannot_start() -> None:
        raise OSError("no processes here")  # e.g. a sandbox without /dev/shm

    monkeypatch.setattr(step, "_executor", cannot_start)
    # Batches given up together count as one failure; three new starts fail in a row.
    submit_all(step, records([value(f"v{i}") for i in range(40)]))
    wait_for(lambda: len(nxt.items) == 40, "screening to finish", tick=step.poll)
    assert step.disabled and step.fallbacks >= 3
    assert done.items == []  # every record went to the in-process steps, which decide as usual
    step.submit(env(raw(value("after"), offset=40), offset=40))
    assert nxt.offsets[-1] == 40  # straight through now


def test_turns_finished_by_screening_are_kept_for_feedback(tmp_path: Path) -> None:
    """``outcomes.retain_unsampled`` with screening: the processes hand each turn they finish
    back as its kept row, redacted there (judged raw, stored redacted: ``before_judging:
    false``), and the keeper stores it; the turns screening hands on are left to the in-process
    steps (whose sample step keeps them when unsampled)."""
    store = Store(f"sqlite:///{tmp_path / 'kept.db'}")
    store.migrate()
    nxt, done = Recorder(), Recorder()
    counts = _Counts()
    keeper = RetainingDone(done, RetainedTurns(store), counts)
    redaction = RedactionConfig(before_judging=False)
    step = ScreenStep(
        nxt,
        done,
        StreamRecorder(Metrics(CollectorRegistry())),
        processes=1,
        decisions=chain_decisions(SAMPLING, redaction),
        batch_size=4,
        keeper=keeper,
    )
    messages = records(
        [
            value("kept-1", answer="Write to jo@example.com"),
            value("rule", feedback={"rating": "negative"}),  # a rule: goes on, not kept here
            value("kept-2", answer="Call +1 415 555 0100"),
            b"{not json",
        ]
    )
    try:
        submit_all(step, messages)
        wait_for(lambda: len(nxt.items) + len(done.items) == 4, "screening", tick=step.poll)
        assert done.offsets == [0, 2] and nxt.offsets == [1, 3]
        wait_for(lambda: counts.by_outcome.get("stored") == 2, what="2 turns kept")
    finally:
        step.close()
        keeper.close()
    with store.transaction(write=False) as conn:
        rows = dict(
            conn.execute(sa.select(retained_turns.c.event_id, retained_turns.c.event)).all()
        )
    assert sorted(rows) == ["kept-1", "kept-2"]
    assert "jo@example.com" not in rows["kept-1"]
    assert TurnEvent.model_validate_json(rows["kept-1"]).event_id == "kept-1"
    store.close()


def test_a_turn_screening_could_not_redact_for_keeping_is_counted_dropped() -> None:
    counts = _Counts()
    keeper = RetainingDone(Recorder(), _NoWriter(), counts)
    try:
        keeper.keep_row(None)
    finally:
        keeper.close()
    assert counts.by_outcome == {"dropped": 1}


class _Counts:
    def __init__(self) -> None:
        self.by_outcome: dict[str, int] = {}

    def record_retained(self, outcome: str, count: int) -> None:
        self.by_outcome[outcome] = self.by_outcome.get(outcome, 0) + count


class _NoWriter:
    def retain(self, items: Any) -> int:
        raise AssertionError("nothing is to be written")
