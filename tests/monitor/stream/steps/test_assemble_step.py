"""The assemble step over a trace split across two partitions: judged whole or not at all.

Time is a ``ManualClock``; the spans are encoded as the Collector writes them (the official
message classes), so the step decodes them as it would from Kafka.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from consumers.dlq import FileDeadLetterSink
from consumers.otel.assembly import TraceAssembler
from consumers.otel.genai import CaseAttributes
from consumers.otel.otlp import Span
from consumers.records import RawMessage, TopicPartition
from monitor.errors import MessageRejected
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.schema.turn import TurnEvent
from monitor.stream.recorder import StreamRecorder
from monitor.stream.steps.assemble import AssembleStep
from monitor.stream.steps.base import Envelope
from tests.consumers.otel.otlp_messages import request_of
from tests.consumers.otel.spans import genai_trace
from tests.monitor.stream.steps.helpers import Recorder

TOPIC = "spans"
P0 = TopicPartition(TOPIC, 0)
P1 = TopicPartition(TOPIC, 1)


class Harness:
    def __init__(self, sink: FileDeadLetterSink, *, max_ready: int = 1024) -> None:
        self.clock = ManualClock()
        self.registry = CollectorRegistry()
        self.turns = Recorder()
        self.done = Recorder()
        self.step = AssembleStep(
            self.turns,
            Recorder(),
            self.done,
            sink,
            StreamRecorder(Metrics(self.registry)),
            TraceAssembler(
                idle_seconds=30.0,
                max_traces=100,
                max_spans=1000,
                max_spans_per_trace=100,
                settle_seconds=2.0,
                remember_finished=100,
            ),
            encodings={TOPIC: "otlp_proto"},
            max_bytes=1_000_000,
            case_attributes=CaseAttributes(),
            clock=self.clock,
            max_ready=max_ready,
        )
        self._offsets = {P0: 0, P1: 0}

    def send(self, tp: TopicPartition, spans: list[Span]) -> None:
        offset = self._offsets[tp]
        self._offsets[tp] += 1
        value = request_of(spans)
        self.step.submit(Envelope(tp, offset, RawMessage(tp.topic, tp.partition, offset, value)))

    def after(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.step.poll()

    def judged(self) -> list[TurnEvent]:
        return [m.payload for m in self.turns.items]

    def skipped(self, reason: str) -> float:
        labels = {"assistant": "support-bot", "reason": reason}
        return self.registry.get_sample_value("casewatch_turns_skipped_total", labels) or 0.0

    def finished_messages(self) -> set[tuple[TopicPartition, int]]:
        return {(m.tp, m.offset) for m in self.done.items}


def _parts() -> tuple[Span, Span, Span]:
    retrieval, chat, agent = genai_trace()
    return agent, retrieval, chat


@pytest.mark.parametrize("root_first", [True, False])
def test_a_trace_split_over_two_partitions_is_judged_whole_in_either_order(
    sink: FileDeadLetterSink, root_first: bool
) -> None:
    h = Harness(sink)
    agent, retrieval, chat = _parts()
    halves = [(P0, [agent, retrieval]), (P1, [chat])]
    if not root_first:
        halves.reverse()
    h.send(*halves[0])
    h.after(1.0)  # the other partition's part comes within the settle time
    assert h.judged() == []
    h.send(*halves[1])
    h.after(1.0)
    assert h.judged() == []  # settling again after the last span
    h.after(1.0)
    (turn,) = h.judged()
    assert turn.conversation_id == "conv-42"
    assert [c.id for c in turn.contexts] == ["kb-1", "kb-2"]
    assert h.skipped("no_genai_span") == 0


def test_a_fragment_without_its_root_is_counted_incomplete_and_not_judged(
    sink: FileDeadLetterSink,
) -> None:
    h = Harness(sink)
    _, retrieval, chat = _parts()
    h.send(P1, [retrieval, chat])  # the root went to a partition another replica reads
    h.after(29.0)
    assert h.judged() == [] and h.finished_messages() == set()
    h.after(1.0)
    assert h.judged() == []
    assert h.skipped("trace_incomplete") == 1
    assert h.skipped("no_genai_span") == 0
    assert h.finished_messages() == {(P1, 0)}  # counted, so its offset can be committed


def test_a_root_fragment_without_genai_spans_is_incomplete_not_no_genai_span(
    sink: FileDeadLetterSink,
) -> None:
    h = Harness(sink)
    agent, retrieval, chat = _parts()
    # The chat span names a parent (a tool span) that never comes: the trace is not whole.
    orphan = replace(chat, parent_span_id="e000000000000009")
    h.send(P0, [agent, retrieval, orphan])
    h.after(30.0)
    assert h.judged() == []
    assert h.skipped("trace_incomplete") == 1


def test_a_span_after_its_trace_was_finished_is_counted_late(sink: FileDeadLetterSink) -> None:
    h = Harness(sink)
    agent, retrieval, chat = _parts()
    h.send(P0, [agent, chat])
    h.after(2.0)
    assert len(h.judged()) == 1  # nothing said a span was missing: judged once settled
    h.send(P1, [retrieval])  # longer behind than settle_seconds
    assert h.skipped("late_span") == 1
    assert (P1, 0) in h.finished_messages()
    h.after(60.0)
    assert len(h.judged()) == 1 and h.skipped("trace_incomplete") == 0
    h.send(P0, [agent, chat])  # the first message read again
    assert h.skipped("duplicate_span") == 1 and h.skipped("late_span") == 1


def test_the_settle_and_idle_clock_stops_while_the_step_refuses_messages(
    sink: FileDeadLetterSink,
) -> None:
    h = Harness(sink, max_ready=1)
    h.turns.capacity = 0  # the next step is full
    first = [replace(s, trace_id="1" * 32) for s in genai_trace()]
    h.send(P0, first)
    agent, retrieval, chat = _parts()
    h.send(P1, [retrieval, chat])
    h.after(2.0)  # the first trace's turn waits for the next step: the step is full
    with pytest.raises(MessageRejected):
        h.send(P0, [agent])
    h.after(100.0)  # the root waits in the daemon's backlog; the fragment must not expire
    assert h.skipped("trace_incomplete") == 0
    h.turns.capacity = None
    h.after(0.0)
    h.send(P0, [agent])
    h.after(2.0)
    assert [t.conversation_id for t in h.judged()] == ["conv-42", "conv-42"]
    assert h.skipped("trace_incomplete") == 0


def test_fragments_are_warned_about_once_naming_the_fix(sink: FileDeadLetterSink) -> None:
    h = Harness(sink)
    with capture_logs() as logs:
        for n in range(3):
            spans = [replace(s, trace_id=f"{n + 1:032x}") for s in _parts()[1:]]
            h.send(P1, spans)
        h.after(30.0)
    assert h.skipped("trace_incomplete") == 3
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert [w["reason"] for w in warnings] == ["trace_incomplete"]
    assert "partition_traces_by_id: true" in warnings[0]["fix"]
    assert "assembly.repartition: true" in warnings[0]["fix"]
    infos = [e for e in logs if e["event"] == "trace not judged"]
    assert len(infos) == 3
