"""The intake interface: where turn events come from (a Kafka consumer group or a file).

Offsets follow Kafka semantics everywhere: a committed offset is the *next* offset to read, so
committing ``m.offset + 1`` marks message ``m`` (and everything before it) as finished.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from consumers.records import RawMessage, TopicPartition

PartitionsCallback = Callable[[set[TopicPartition]], None]


class TurnSource(Protocol):
    def poll(
        self, timeout_s: float, max_records: int, *, join_limit_s: float | None = None
    ) -> list[RawMessage]:
        """Up to ``max_records`` messages, waiting about ``timeout_s`` when none is ready.

        A Kafka source may wait longer while its group rebalances (until the join completes,
        bounded by the JoinGroup timeout, or by ``join_limit_s`` when given: a stopping
        daemon's drain ends by its deadline). Paused partitions deliver nothing. Raises
        ``TransportError`` (``BrokerError``, ``TurnFileError``) on an unrecoverable failure (a
        slow or briefly unreachable broker just yields ``[]``).
        """
        ...

    def commit(self, offsets: Mapping[TopicPartition, int], timeout_s: float | None = None) -> None:
        """Durably record ``offsets`` (next offset to read) before returning.

        Gives up after ``timeout_s`` (None: the source's own limit; never unbounded). Raises
        ``monitor.errors.TransportError`` when the commit failed or timed out.
        """
        ...

    def pause(self, tps: Iterable[TopicPartition]) -> None: ...

    def resume(self, tps: Iterable[TopicPartition]) -> None: ...

    def paused(self) -> set[TopicPartition]: ...

    def assignment(self) -> set[TopicPartition]: ...

    def lag(self) -> dict[TopicPartition, int]:
        """End offset minus position per assigned partition; cached, never blocks on I/O."""
        ...

    def set_rebalance_listener(
        self, on_assigned: PartitionsCallback, on_revoked: PartitionsCallback
    ) -> None:
        """Callbacks for partitions gained and lost.

        ``on_revoked`` runs before the partitions are handed to another consumer, so it may
        ``commit()`` what is finished for them. Callbacks run on the thread that called
        ``poll()`` or ``close()``, while that call is in progress (the Kafka source hands them
        there from its client's I/O thread), so they may use what that thread owns.
        """
        ...

    def ping(self) -> bool:
        """Whether the broker (or file) is reachable, for ``/readyz``. Cheap; never raises."""
        ...

    def close(self) -> None:
        """Release the source within a bounded time, also when its broker is unreachable."""
        ...
