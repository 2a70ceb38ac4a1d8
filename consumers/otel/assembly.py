"""Spans → complete traces, with bounded memory (pure: time is passed in, no I/O).

The spans of one trace can arrive in several Kafka messages (the Collector's exporter batches
by time and size, and a trace's spans end at different moments), and, when the exporter does
not key its messages by trace id, on several partitions in any order: the root can come first
and its children from another partition later. A trace is complete when its root span has
arrived (a span is exported only once ended, so the root's arrival means it has ended), every
parent a span names is there, and no span of it has arrived for ``settle_seconds`` (the
stragglers of other partitions); or when no span of it has arrived for ``idle_seconds``.

A finished trace says whether it is ``whole``: its root is there and no span names a parent
that is missing. One that is not (finished by idleness, a cap or a drain without its root, or
with orphans) is a fragment: the caller must not judge it as a trace.

The ids of recently finished traces are remembered (``remember_finished``, least recent
forgotten first) with their span ids, so a span arriving after its trace was finished is told
apart (``take_late``): ``late`` when the trace did not have it, ``duplicate`` when it did (a
message read again, a span re-published). Such spans never open a new trace: a fragment of a
trace already judged would be judged again, half-built.

Memory is bounded by ``max_traces`` open traces and ``max_spans`` open spans in all: adding
past either finishes the oldest open trace early, with cause ``"cap"`` (it is assembled from
what it has, or skipped, and counted). A trace holding more than ``max_spans_per_trace`` spans
is finished at once with cause ``"too_many_spans"``.

Each open trace remembers the messages its spans came from (opaque keys), so the caller can
hold those messages' offsets until every turn built from the trace is finished
(``MessageHolds``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from consumers.otel.otlp import Span

# Why a trace was finished: its root arrived, it went idle, the memory cap pushed it out, it
# grew past the per-trace span cap, or the stream is draining (a stop: nothing more will come).
Cause = Literal["root", "idle", "cap", "too_many_spans", "drain"]
CAUSES: tuple[Cause, ...] = ("root", "idle", "cap", "too_many_spans", "drain")


@dataclass
class _Open:
    spans: dict[str, Span] = field(default_factory=dict)
    messages: set[Hashable] = field(default_factory=set)
    last_seen: float = 0.0
    has_root: bool = False
    # Parents named by the trace's spans and not (yet) among them: kept as spans arrive, so
    # completion never walks a trace's spans.
    missing: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class CompletedTrace:
    trace_id: str
    spans: tuple[Span, ...]
    messages: frozenset[Hashable]
    cause: Cause
    # The root is there and every parent a span names is in the trace.
    whole: bool = True
    # Parents named by spans of the trace and absent from it (at most a few, for the log).
    missing_parents: tuple[str, ...] = ()


@dataclass(frozen=True)
class LateSpans:
    """Spans of one message that belong to a trace already finished."""

    trace_id: str
    message: Hashable
    spans: tuple[Span, ...]
    # True when the finished trace had every one of them (read again), False when it had not.
    duplicate: bool


@dataclass(frozen=True)
class _Finished:
    span_ids: frozenset[str]
    messages: frozenset[Hashable]


class TraceAssembler:
    """Not thread-safe: one pipeline step owns it."""

    def __init__(
        self,
        *,
        idle_seconds: float,
        max_traces: int,
        max_spans: int,
        max_spans_per_trace: int,
        settle_seconds: float = 0.0,
        remember_finished: int = 10_000,
    ) -> None:
        if max_traces < 1 or max_spans < 1 or max_spans_per_trace < 1:
            raise ValueError("assembly caps must be at least 1")
        if settle_seconds < 0 or remember_finished < 0:
            raise ValueError("settle_seconds and remember_finished cannot be negative")
        self._idle = idle_seconds
        self._settle = settle_seconds
        self._remember = remember_finished
        # Recently finished traces, least recent first (bounded: ``remember_finished``).
        self._done: OrderedDict[str, _Finished] = OrderedDict()
        self._late: list[LateSpans] = []
        self._max_traces = max_traces
        self._max_spans = max_spans
        self._max_per_trace = max_spans_per_trace
        # Insertion order = order of first arrival: the head is the oldest open trace.
        self._open: OrderedDict[str, _Open] = OrderedDict()
        # The same traces by their last span's arrival, least recent first, and those whose root
        # has arrived: completion looks only at what may be complete, never at every trace
        # (per message, with 10,000 open traces, a full scan was the cost of the whole step).
        self._activity: OrderedDict[str, None] = OrderedDict()
        self._rooted: set[str] = set()
        self._span_count = 0
        self._finished: list[CompletedTrace] = []

    @property
    def open_traces(self) -> int:
        return len(self._open)

    @property
    def open_spans(self) -> int:
        return self._span_count

    def add(self, spans: Iterable[Span], message: Hashable, now: float) -> set[str]:
        """Add one message's spans; returns the ids of the traces they went to (the caller
        holds ``message`` once for each)."""
        touched: set[str] = set()
        late: dict[str, list[Span]] = {}
        for span in spans:
            trace = self._open.get(span.trace_id)
            if trace is None and span.trace_id in self._done:
                late.setdefault(span.trace_id, []).append(span)
                continue
            if trace is None:
                self._make_room()
                trace = _Open()
                self._open[span.trace_id] = trace
            if span.span_id not in trace.spans:
                self._span_count += 1
            trace.spans[span.span_id] = span  # a re-sent span replaces itself
            trace.missing.discard(span.span_id)
            parent = span.parent_span_id
            if parent is not None and parent not in trace.spans:
                trace.missing.add(parent)
            trace.messages.add(message)
            trace.last_seen = now
            self._activity[span.trace_id] = None
            self._activity.move_to_end(span.trace_id)
            if span.is_root:
                trace.has_root = True
                self._rooted.add(span.trace_id)
            touched.add(span.trace_id)
            if len(trace.spans) >= self._max_per_trace:
                self._finish(span.trace_id, "too_many_spans")
            elif self._span_count > self._max_spans:
                self._evict_oldest()
        for trace_id, found in late.items():
            seen = self._done[trace_id].span_ids
            self._late.append(
                LateSpans(trace_id, message, tuple(found), all(s.span_id in seen for s in found))
            )
        return touched

    def take_late(self) -> list[LateSpans]:
        """Spans that came after their trace was finished, since the last call."""
        late, self._late = self._late, []
        return late

    def _make_room(self) -> None:
        while len(self._open) >= self._max_traces:
            self._evict_oldest()

    def _evict_oldest(self) -> None:
        if self._open:
            self._finish(next(iter(self._open)), "cap")

    def _drop(self, trace_id: str) -> _Open:
        trace = self._open.pop(trace_id)
        self._activity.pop(trace_id, None)
        self._rooted.discard(trace_id)
        self._span_count -= len(trace.spans)
        return trace

    def _finish(self, trace_id: str, cause: Cause) -> None:
        trace = self._drop(trace_id)
        spans = tuple(trace.spans.values())
        messages = frozenset(trace.messages)
        missing = sorted(trace.missing)
        self._finished.append(
            CompletedTrace(
                trace_id,
                spans,
                messages,
                cause,
                whole=trace.has_root and not missing,
                missing_parents=tuple(missing[:5]),
            )
        )
        if self._remember:
            self._done[trace_id] = _Finished(frozenset(trace.spans), messages)
            self._done.move_to_end(trace_id)
            while len(self._done) > self._remember:
                self._done.popitem(last=False)

    def complete(self, now: float) -> list[CompletedTrace]:
        """Traces finished since the last call: pushed out by a cap, rooted and settled, or
        idle. A rooted trace with a span whose parent has not come waits for it (at most until
        it goes idle)."""
        for trace_id in sorted(self._rooted):
            trace = self._open[trace_id]
            if now - trace.last_seen >= self._settle and not trace.missing:
                self._finish(trace_id, "root")
        while self._activity:
            trace_id = next(iter(self._activity))
            if now - self._open[trace_id].last_seen < self._idle:
                break
            self._finish(trace_id, "idle")
        done, self._finished = self._finished, []
        return done

    def drain(self) -> list[CompletedTrace]:
        """Finish every open trace now (no more spans will come: the stream is stopping)."""
        for trace_id in list(self._open):
            self._finish(trace_id, "drain")
        done, self._finished = self._finished, []
        return done

    def forget(self, keep: Callable[[Hashable], bool]) -> int:
        """Drop the open traces holding a message for which ``keep(message)`` is false (their
        partition was revoked: the next owner re-reads them); returns how many were dropped.
        Finished traces that read such a message are forgotten too: if the partition comes
        back, its messages are read again and the trace must be built again, not called late."""
        dropped = [t for t, o in self._open.items() if not all(keep(m) for m in o.messages)]
        for trace_id in dropped:
            self._drop(trace_id)
        for trace_id in [t for t, f in self._done.items() if not all(keep(m) for m in f.messages)]:
            del self._done[trace_id]
        return len(dropped)


class MessageHolds:
    """How many unfinished things (open traces, turns being judged) each message feeds.

    A message is finished, and its offset may be committed, only when the count reaches zero:
    the at-least-once rule carried across assembly.
    """

    def __init__(self) -> None:
        self._counts: dict[Hashable, int] = {}

    def __len__(self) -> int:
        return len(self._counts)

    def __contains__(self, message: object) -> bool:
        return message in self._counts

    def held(self) -> list[Hashable]:
        return list(self._counts)

    def hold(self, message: Hashable, times: int = 1) -> None:
        if times > 0:
            self._counts[message] = self._counts.get(message, 0) + times

    def release(self, messages: Iterable[Hashable], times: int = 1) -> Iterator[Hashable]:
        """Release ``times`` holds on each message; yields those now free."""
        for message in messages:
            left = self._counts.get(message, 0) - times
            if left > 0:
                self._counts[message] = left
            elif message in self._counts:
                del self._counts[message]
                yield message

    def drop(self, keep: Callable[[Hashable], bool]) -> None:
        for message in [m for m in self._counts if not keep(m)]:
            del self._counts[message]
