"""Where a partition that comes back to the same consumer after a rebalance is read again.

kafka-python 3.0.12, like Kafka's Java consumer, keeps a partition's fetch position when a
rebalance gives it back to the member that held it (``SubscriptionState.assign_from_subscribed``
preserves the state of every partition in both assignments). The daemon, though, drops the
turns of a revoked partition that it had read but not finished: it commits what it finished
and leaves the rest for the partition's next owner, who reads from the commit. When the next
owner is the same consumer, its position is already past those turns, and without a seek they
would never be read again: the partition stalls below the commit, lag and all, while the
consumer reads on from its position.

So the source remembers, per partition, the offset from which nothing is known finished: the
last offset it committed, or before any commit the first offset it delivered. A partition
revoked (or lost) and given back in the next assignment is sought there; the turns it
re-reads that were finished after all are stored once (the store is idempotent). Pure: the
source makes the seeks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from consumers.records import TopicPartition


class ResumePoints:
    def __init__(self) -> None:
        self._points: dict[TopicPartition, int] = {}
        self._revoked: set[TopicPartition] = set()

    def delivered(self, tp: TopicPartition, first_offset: int) -> None:
        """Records of ``tp`` from ``first_offset`` on were handed to the caller."""
        self._points.setdefault(tp, first_offset)

    def committed(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Everything below each offset is finished (committed, or handed in for a commit)."""
        self._points.update(offsets)

    def revoked(self, tps: Iterable[TopicPartition]) -> None:
        self._revoked.update(tps)

    def assigned(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The seeks the new assignment needs: each partition given back after a revocation,
        to its resume point. Partitions revoked and not given back are forgotten (a later
        assignment of them starts from the group's commit, as for any new partition)."""
        tps = set(tps)
        back = self._revoked & tps
        seeks = {tp: self._points[tp] for tp in back if tp in self._points}
        # Revoked and gone, or new to this consumer (kafka-python starts those at the group's
        # commit): a point left from an earlier ownership would only re-read finished turns.
        for tp in (self._revoked - tps) | (tps - back):
            self._points.pop(tp, None)
        self._revoked.clear()
        return seeks

    def clear(self) -> None:
        """A fresh consumer (a rejoin): nothing of the old one's positions carries over."""
        self._points.clear()
        self._revoked.clear()
