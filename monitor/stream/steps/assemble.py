"""OTLP topics: span batches → traces → turns, holding each message's offset until every turn
built from it is finished.

The OpenTelemetry Collector's Kafka exporter writes one ``ExportTraceServiceRequest`` per
message; the spans of one trace may come in several messages. Each message is decoded
(``consumers.otel.otlp``; an unreadable one goes to the dead-letter topic with the reason, like
any poison record), its spans go to the ``TraceAssembler`` and the message is held once for
every trace it fed. A complete trace becomes turns (``consumers.otel.genai``): each goes on
down the chain in an envelope whose offset is a ticket (negative, never a Kafka offset), and
the message holds pass from the trace to its turns. What cannot be judged is counted in
``casewatch_turns_skipped_total`` under its reason and releases its holds at once.

``TicketGate`` (``ticket_gate.py``) sits in front of the commit step: a finished ticket
releases its turn's holds, and a message whose last hold is gone is finished, so its offset
becomes committable. Hence
"committed" still means "stored, skipped or dead-lettered" for every turn the message fed: a
SIGKILL with a trace half-read loses nothing (the messages are re-read and the trace built
again) and judges nothing twice (the turn's event id comes from its trace and span ids, and the
look-up step finds it stored).

A trace is judged only whole (``CompletedTrace.whole``: its root is there and every parent a
span names). When the Collector's exporter does not key its messages by trace id, one trace's
spans reach several partitions in any order: the assembler waits ``settle_seconds`` after the
root for stragglers, and what still is not whole when it finishes (idle, a cap) is a fragment,
counted ``trace_incomplete``, never judged as if complete. A span that comes after its trace was
finished is counted ``late_span`` (``duplicate_span`` when the trace already had it). The first
of each is logged as a warning naming the fix, once per step (the daemon has one: once per
process); every one is logged at info with its trace id.

Assembly sees only the partitions this member reads. When the messages of an OTLP topic are
not keyed by trace id and other members of the group read some of its partitions, a trace
that looks whole here (its root, its inference span, no parent missing) may still lack a leaf
that went elsewhere (the retrieval span: a turn without its contexts). Such a trace is not
judged: it is counted ``trace_not_keyed`` and warned about with the fix. A message is keyed
when its key is the trace id (hex or the 16 bytes) of every span in it, as the Collector
writes with ``partition_traces_by_id`` and as the repartition topic is written.

The settle and idle times run on the step's intake clock, which stops while the step refuses
messages (backpressure): a partition whose messages wait in the daemon's backlog cannot send
its part of a trace, so the wait must not count against it.

With ``assembly.repartition``, an OTLP topic's messages are not assembled where they are
read: each is split by trace (``split_by_trace``) and re-published keyed by trace id to the
topic's repartition topic (``consumers.repartition``), which the group reads too and this
step assembles like any OTLP topic. One replica then reads every span of a trace, whichever
replicas read the partitions its spans were written to. The sending, the acknowledgements
and the retries are ``monitor.stream.steps.republishing``'s: the source message is marked done
only once every part is acknowledged, and on a revoke or a stop what is not acknowledged stays
uncommitted, to be re-published by the next owner (the parts already sent then arrive twice:
the assembler keeps one copy of a span, or counts ``duplicate_span`` once its trace is
finished).

On a stop, open traces are left open: their messages stay uncommitted and are read again by
whoever consumes the partition next. On a revoke the same holds for the revoked partitions.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Collection, Hashable, Mapping, Sequence
from typing import Any, Protocol

import structlog

from consumers.dlq import DeadLetterSink
from consumers.otel.assembly import CompletedTrace, LateSpans, MessageHolds, TraceAssembler
from consumers.otel.genai import CaseAttributes, Skipped, turns_from_trace
from consumers.otel.otlp import OtlpEncoding, Span, decode_spans, split_by_trace
from consumers.records import RawMessage, TopicPartition
from consumers.repartition import KnowsPartitions, TraceRepublisher
from monitor.errors import InvalidEvent, MessageRejected
from monitor.runtime.clock import Clock
from monitor.sampling.sampler import SampleDecision
from monitor.schema.turn import TurnEvent
from monitor.stream.steps.base import (
    DoneStep,
    Envelope,
    PendingDeadLetters,
    ProcessingStep,
    forward,
)
from monitor.stream.steps.republishing import RepartitionMetrics, Republishing

log = structlog.get_logger(__name__)

SPLIT_TRACE_FIX = (
    "the spans of one trace reach this consumer from several partitions, or not at all: key the "
    "Collector's Kafka exporter by trace id (partition_traces_by_id: true), or set "
    "assembly.repartition: true (casewatch re-keys the spans by trace id itself)"
)
INFERENCE_ELSEWHERE_FIX = (
    "a trace with GenAI spans but no inference span: if the model was called, its span went "
    "to a partition another replica reads; "
    f"{SPLIT_TRACE_FIX}"
)
LATE_SPAN_FIX = (
    f"{SPLIT_TRACE_FIX}; with it set, raise assembly.settle_seconds (spans of a trace came "
    "longer apart than it)"
)


UNKNOWN_ASSISTANT = "unknown_service"
# Turns assembled and not yet taken by the next step; past it, intake is refused (backpressure).
MAX_READY = 1024


class AssemblyMetrics(RepartitionMetrics, Protocol):
    def record_dead_letter(self, reason: str) -> None: ...

    def record_dead_letter_held(self, why: str) -> None: ...

    def record_sampling(self, assistant: str, decision: SampleDecision, count: int = 1) -> None: ...

    def record_traces(
        self, open_traces: int, open_spans: int, finished: dict[str, int]
    ) -> None: ...


_Key = tuple[TopicPartition, int]


class AssembleStep:
    def __init__(
        self,
        next_step: ProcessingStep[TurnEvent],
        rest: ProcessingStep[RawMessage],
        done: DoneStep,
        dlq: DeadLetterSink,
        metrics: AssemblyMetrics,
        assembler: TraceAssembler,
        *,
        encodings: dict[str, OtlpEncoding],
        max_bytes: int,
        case_attributes: CaseAttributes,
        clock: Clock,
        flush_timeout_s: float = 10.0,
        max_ready: int = MAX_READY,
        repartition: Mapping[str, str] | None = None,
        republisher: TraceRepublisher | None = None,
        partitions: KnowsPartitions | None = None,
    ) -> None:
        self._next = next_step
        # The head of the chain for every other topic (decode). It leads to ``next_step`` too,
        # so poll/join/close go through it: each step of the shared tail is called once.
        self._rest = rest
        self._done = done
        self._dlq = dlq
        self._metrics = metrics
        self._assembler = assembler
        self._encodings = encodings
        self._max_bytes = max_bytes
        self._case = case_attributes
        self._clock = clock
        self._flush_timeout = flush_timeout_s
        self._max_ready = max_ready
        self._holds = MessageHolds()
        self._tickets: dict[int, tuple[TopicPartition, frozenset[Hashable]]] = {}
        self._next_ticket = itertools.count(1)
        self._ready: deque[Envelope[TurnEvent]] = deque()
        self._dead_letters = PendingDeadLetters(dlq, done, metrics.record_dead_letter_held)
        self._finished: dict[str, int] = {}
        self._warned: set[str] = set()
        # Source topic → its repartition topic; only with a producer (a file has one
        # partition: nothing to repartition).
        self._republishing = Republishing(
            republisher, repartition or {}, done, metrics, clock, partitions
        )
        # Who else may read a trace's other spans: held messages not keyed by trace id, and,
        # per topic, whether this member reads all its partitions (asked once per poll).
        self._partitions = partitions
        self._unkeyed: set[Hashable] = set()
        self._whole_topic: dict[str, bool] = {}
        # The intake clock: real time less the time the step spent refusing messages.
        self._stalled_since: float | None = None
        self._stalled_total = 0.0

    # ------------------------------------------------------------------ intake

    def submit(self, message: Envelope[RawMessage]) -> None:
        encoding = self._encodings.get(message.tp.topic)
        if encoding is None:
            self._rest.submit(message)
            return
        if len(self._ready) >= self._max_ready:
            forward(self._ready, self._next)
            if len(self._ready) >= self._max_ready:
                if self._stalled_since is None:
                    self._stalled_since = self._clock.monotonic()
                raise MessageRejected("assembled turns are waiting for the next step")
        if self._stalled_since is not None:
            self._stalled_total += self._clock.monotonic() - self._stalled_since
            self._stalled_since = None
        internal = self._republishing.target(message.tp.topic)
        if internal is not None and self._republishing.full():
            raise MessageRejected("re-published spans wait for the broker's acknowledgement")
        try:
            spans = decode_spans(message.payload.value, encoding, self._max_bytes)
            parts = split_by_trace(message.payload.value or b"", encoding) if internal else {}
        except InvalidEvent as exc:
            self._dead_letter(message, exc)
            return
        if internal is not None:
            self._republishing.republish(message, internal, parts)
            return
        key: _Key = (message.tp, message.offset)
        touched = self._assembler.add(spans, key, self._now())
        for late in self._assembler.take_late():
            self._late(late)
        if not touched:  # no spans, or only late ones: nothing to wait for
            self._done.submit(message)
            return
        self._holds.hold(key, len(touched))
        if self._partitions is not None and not _keyed(message.payload.key, spans):
            self._unkeyed.add(key)
        self._complete()
        forward(self._ready, self._next)

    def _now(self) -> float:
        """The intake clock (see the module's docstring)."""
        now = self._clock.monotonic() if self._stalled_since is None else self._stalled_since
        return now - self._stalled_total

    def _dead_letter(self, message: Envelope[RawMessage], exc: InvalidEvent) -> None:
        # As in the decode step: handed over without waiting, done once acknowledged.
        self._dead_letters.send(message, exc, self._metrics.record_dead_letter, "OTLP record")

    # ------------------------------------------------------------------ traces → turns

    def _complete(self) -> None:
        for trace in self._assembler.complete(self._now()):
            self._finished[trace.cause] = self._finished.get(trace.cause, 0) + 1
            self._turns(trace)

    def _turns(self, trace: CompletedTrace) -> None:
        if not trace.whole:
            self._incomplete(trace)
            return
        if self._maybe_elsewhere(trace):
            detail = (
                f"{len(trace.spans)} spans from messages not keyed by trace id, and other "
                "members read other partitions of the topic: spans of it may be there"
            )
            self._warn_once("trace_not_keyed", SPLIT_TRACE_FIX, trace.trace_id)
            self._skip(trace, Skipped("trace_not_keyed", detail, trace.trace_id, None))
            self._release(trace.messages)
            return
        turns, skipped = turns_from_trace(trace.spans, self._case)
        for skip in skipped:
            if skip.reason == "no_inference_span":
                self._warn_once(skip.reason, INFERENCE_ELSEWHERE_FIX, trace.trace_id)
            self._skip(trace, skip)
        messages = trace.messages
        # The trace's hold on each message passes to its turns (none: released now).
        for message in messages:
            self._holds.hold(message, len(turns))
        self._release(messages)
        tp = _last_tp(messages)
        for turn in turns:
            ticket = -next(self._next_ticket)
            self._tickets[ticket] = (tp, messages)
            self._ready.append(Envelope(tp, ticket, turn))

    def _maybe_elsewhere(self, trace: CompletedTrace) -> bool:
        """Whether spans of ``trace`` may have gone to a partition another member reads."""
        if self._partitions is None:
            return False
        topics = {key[0].topic for key in trace.messages if key in self._unkeyed}  # type: ignore[index]
        return any(not self._reads_whole(topic) for topic in topics)

    def _reads_whole(self, topic: str) -> bool:
        whole = self._whole_topic.get(topic)
        if whole is None and self._partitions is not None:
            count = self._partitions.partition_count(topic)
            owned = {tp for tp in self._partitions.assignment() if tp.topic == topic}
            # Unknown counts as split: a trace is judged only when known whole.
            whole = count is not None and len(owned) >= count
            self._whole_topic[topic] = whole
        return bool(whole)

    def _incomplete(self, trace: CompletedTrace) -> None:
        """A fragment: counted and its holds released, never judged as a trace."""
        root = "with its root" if any(s.is_root for s in trace.spans) else "without its root"
        missing = ", ".join(trace.missing_parents) or "none"
        detail = (
            f"finished ({trace.cause}) {root}, {len(trace.spans)} spans, parents missing: {missing}"
        )
        self._warn_once("trace_incomplete", SPLIT_TRACE_FIX, trace.trace_id)
        self._skip(trace, Skipped("trace_incomplete", detail, trace.trace_id, None))
        self._release(trace.messages)

    def _late(self, late: LateSpans) -> None:
        reason = "duplicate_span" if late.duplicate else "late_span"
        if not late.duplicate:
            self._warn_once("late_span", LATE_SPAN_FIX, late.trace_id)
        detail = f"{len(late.spans)} spans after their trace was finished"
        self._skip_spans(late.spans, Skipped(reason, detail, late.trace_id, late.spans[0].span_id))

    def _warn_once(self, reason: str, fix: str, trace_id: str) -> None:
        # The counter says how often, the info lines which traces; the warning says what to do.
        if reason not in self._warned:
            self._warned.add(reason)
            log.warning("traces cannot be judged whole", reason=reason, fix=fix, trace_id=trace_id)

    def _skip(self, trace: CompletedTrace, skip: Skipped) -> None:
        self._skip_spans(trace.spans, skip)

    def _skip_spans(self, spans: Sequence[Span], skip: Skipped) -> None:
        service = spans[0].resource.get("service.name") if spans else None
        assistant = service if isinstance(service, str) and service else UNKNOWN_ASSISTANT
        self._metrics.record_sampling(assistant, SampleDecision(False, skip.reason))
        log.info(
            "trace not judged",
            reason=skip.reason,
            detail=skip.detail,
            trace_id=skip.trace_id,
            span_id=skip.span_id,
        )

    def _release(self, messages: Collection[Hashable], times: int = 1) -> None:
        for key in self._holds.release(messages, times):
            self._unkeyed.discard(key)
            tp: TopicPartition = key[0]  # type: ignore[index]
            offset: int = key[1]  # type: ignore[index]
            self._done.submit(Envelope(tp, offset, None))

    def finish_ticket(self, ticket: int) -> None:
        """A turn built here is finished (stored, skipped or dead-lettered downstream)."""
        entry = self._tickets.pop(ticket, None)
        if entry is not None:
            self._release(entry[1])

    # ------------------------------------------------------------------ step protocol

    def poll(self) -> None:
        self._whole_topic.clear()  # the assignment may have changed since the last poll
        self._republishing.check_topics()
        self._dead_letters.settle()
        self._republishing.settle()
        self._complete()
        forward(self._ready, self._next)
        self._metrics.record_traces(
            self._assembler.open_traces, self._assembler.open_spans, self._finished
        )
        self._finished = {}
        self._rest.poll()

    def join(self, timeout: float | None = None) -> None:
        # Open traces stay open: their messages are not committed and are read again.
        bound = self._flush_timeout if timeout is None else min(timeout, self._flush_timeout)
        self._dead_letters.flush(bound)
        self._republishing.flush(bound)
        self._complete()
        forward(self._ready, self._next)
        self._rest.join(timeout)

    def close(self) -> None:
        try:
            self._republishing.close()
        finally:
            self._rest.close()

    # ------------------------------------------------------------------ rebalance protocol

    def hold(self, tps: Collection[TopicPartition]) -> int:
        # Nothing here costs a judge call: open traces just wait for their spans.
        return 0

    def running_in(self, tps: Collection[TopicPartition]) -> int:
        return 0

    def release(self, owned: Collection[TopicPartition]) -> None:
        mine: set[TopicPartition] = {key[0] for key in self._holds.held()}  # type: ignore[index]
        mine.update(self._republishing.partitions())
        self.discard(mine - set(owned))

    def discard(self, tps: Collection[TopicPartition]) -> None:
        """Forget what was read from partitions no longer ours: the next owner re-reads it."""
        gone = set(tps)

        def keep(key: Any) -> bool:
            return bool(key[0] not in gone)

        self._assembler.forget(keep)
        self._holds.drop(keep)
        self._unkeyed = {k for k in self._unkeyed if keep(k)}
        self._whole_topic.clear()
        self._ready = deque(m for m in self._ready if m.tp not in gone)
        self._tickets = {t: e for t, e in self._tickets.items() if e[0] not in gone}
        self._republishing.discard(gone)

    def wait_any(self, timeout: float) -> bool:
        return False


def _keyed(key: bytes | None, spans: Sequence[Span]) -> bool:
    """Whether a message is keyed by the trace id of every span in it (hex, or the bytes)."""
    if not key:
        return False
    if len(key) == 16:
        trace_id = key.hex()
    else:
        try:
            trace_id = key.decode("ascii").lower()
        except UnicodeDecodeError:
            return False
    return all(s.trace_id == trace_id for s in spans)


def _last_tp(messages: Collection[Hashable]) -> TopicPartition:
    keys: list[Any] = sorted(messages, key=lambda k: k[1])
    tp: TopicPartition = keys[-1][0]
    return tp
