"""Which offsets are safe to commit when messages finish out of order (pure, no I/O): the one
place the intake tracks per-partition offsets (the Kafka source keeps none; lag reads the
consumer's own position).

Per partition the committable offset is the lowest offset still in flight, or, when nothing
is in flight, one past the highest finished offset: every message below it is finished. Judge
calls finish in any order, so committing the latest finished offset instead would skip (and,
after a crash, lose) the slow ones.

Offsets must be tracked in increasing order per partition (the order a consumer delivers
them); gaps are fine (compacted topics, transaction markers, skipped blank lines).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from consumers.records import TopicPartition


@dataclass
class _PartitionState:
    # Tracked offsets in delivery order; the finished ones at its head are dropped by advance().
    queue: deque[int]
    in_flight: set[int] = field(default_factory=set)
    last_tracked: int = -1
    # Everything below ``frontier`` is finished and has left ``queue``.
    frontier: int = 0
    # The offset last reported as committed; nothing is committable until it can advance.
    committed: int = 0

    def advance(self) -> int:
        while self.queue and self.queue[0] not in self.in_flight:
            self.frontier = self.queue.popleft() + 1
        return self.queue[0] if self.queue else self.frontier


class OffsetTracker:
    """Not thread-safe: the pipeline calls it from its own loop (or under its own lock)."""

    def __init__(self) -> None:
        self._parts: dict[TopicPartition, _PartitionState] = {}

    def track(self, tp: TopicPartition, offset: int) -> None:
        """Record that ``offset`` was handed to the pipeline and is now in flight."""
        state = self._parts.get(tp)
        if state is None:
            # What precedes the first tracked offset was committed before (or is not ours).
            state = _PartitionState(queue=deque(), frontier=offset, committed=offset)
            self._parts[tp] = state
        elif offset <= state.last_tracked:
            raise ValueError(
                f"{tp.topic}/{tp.partition}: offset {offset} tracked after "
                f"{state.last_tracked}; offsets must be tracked in increasing order"
            )
        state.queue.append(offset)
        state.in_flight.add(offset)
        state.last_tracked = offset

    def done(self, tp: TopicPartition, offset: int) -> bool:
        """Mark ``offset`` finished. False when it is not in flight (e.g. its partition was
        revoked meanwhile, or it was already done): late completions are harmless."""
        state = self._parts.get(tp)
        if state is None or offset not in state.in_flight:
            return False
        state.in_flight.discard(offset)
        return True

    def committable(self) -> dict[TopicPartition, int]:
        """Per partition, the next offset to read such that all tracked messages below it are
        finished; only partitions that advanced since the last ``mark_committed``."""
        out: dict[TopicPartition, int] = {}
        for tp, state in self._parts.items():
            offset = state.advance()
            if offset > state.committed:
                out[tp] = offset
        return out

    def mark_committed(self, offsets: Mapping[TopicPartition, int]) -> None:
        for tp, offset in offsets.items():
            state = self._parts.get(tp)
            if state is not None:
                state.committed = max(state.committed, offset)

    def revoke(self, tps: Iterable[TopicPartition]) -> None:
        """Forget partitions this consumer no longer owns."""
        for tp in tps:
            self._parts.pop(tp, None)

    def next_offset(self, tp: TopicPartition) -> int:
        """One past the last offset tracked in ``tp`` (-1 when none is): a record below it is a
        re-delivery (the consumer rewound), which the caller handles before tracking it."""
        state = self._parts.get(tp)
        return -1 if state is None else state.last_tracked + 1

    def pending_count(self) -> int:
        """Messages tracked and not yet finished, over all partitions."""
        return sum(len(s.in_flight) for s in self._parts.values())

    def partitions(self) -> set[TopicPartition]:
        return set(self._parts)
