"""Spans → complete traces, with bounded memory (pure: time is passed in, no I/O).

The spans of one trace can arrive in several Kafka messages (the Collector's exporter batches
by time and size, and a trace's spans end at different moments). A trace is complete when its
root span has arrived (a span is exported only once ended, so the root's arrival means it has
ended), or when no span of it has arrived for ``idle_seconds``.

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


@dataclass(frozen=True)
class CompletedTrace:
    trace_id: str
    spans: tuple[Span, ...]
    messages: frozenset[Hashable]
    cause: Cause


class TraceAssembler:
    """Not thread-safe: one pipeline step owns it."""

    def __init__(
        self,
        *,
        idle_seconds: float,
        max_traces: int,
        max_spans: int,
        max_spans_per_trace: int,
    ) -> None:
        if max_traces < 1 or max_spans < 1 or max_spans_per_trace < 1:
            raise ValueError("assembly caps must be at least 1")
        self._idle = idle_seconds
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
        for span in spans:
            trace = self._open.get(span.trace_id)
            if trace is None:
                self._make_room()
                trace = _Open()
                self._open[span.trace_id] = trace
            if span.span_id not in trace.spans:
                self._span_count += 1
            trace.spans[span.span_id] = span  # a re-sent span replaces itself
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
        return touched

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
        self._finished.append(
            CompletedTrace(trace_id, tuple(trace.spans.values()), frozenset(trace.messages), cause)
        )

    def complete(self, now: float) -> list[CompletedTrace]:
        """Traces finished since the last call: pushed out by a cap, rooted, or idle."""
        for trace_id in sorted(self._rooted):
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
        partition was revoked: the next owner re-reads them); returns how many were dropped."""
        dropped = [t for t, o in self._open.items() if not all(keep(m) for m in o.messages)]
        for trace_id in dropped:
            self._drop(trace_id)
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
