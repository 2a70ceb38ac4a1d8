"""The second protocol of the steps that hold turns in flight: what a rebalance asks of them.

A revoke must never make one turn's judge call be paid twice: by this consumer, which would
store the verdict later, and by the partition's next owner, which re-reads everything past the
last commit. So on a revoke the daemon asks each step holding turns to ``hold`` the revoked
partitions' work that has not started (nothing new starts for them), waits for the work already
under way (``running_in``, ``wait_any``: paid for, so it is finished and stored), commits, and
after the group is joined again ``release``s what it still owns and ``discard``s what it re-reads
or lost. Steps that hold nothing for a partition implement it as no-ops; the pipeline iterates
over every step that implements it in chain order, without knowing which they are.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from consumers.records import TopicPartition


class Rebalancing(Protocol):
    def hold(self, tps: Collection[TopicPartition]) -> int:
        """Revoked: start no new work for these partitions' turns (hand on what is cheap to
        finish); returns how many turns are held."""
        ...

    def running_in(self, tps: Collection[TopicPartition]) -> int:
        """Paid work under way for turns of these partitions (it is finished, not abandoned)."""
        ...

    def release(self, owned: Collection[TopicPartition]) -> None:
        """After the rebalance: resume the held turns of partitions still ``owned``, drop the
        rest (their new owner reads them from the last commit)."""
        ...

    def discard(self, tps: Collection[TopicPartition]) -> None:
        """Forget every turn of these partitions (re-read after a rewind, or owned elsewhere)."""
        ...

    def wait_any(self, timeout: float) -> bool:
        """Block until some background work finishes or ``timeout`` passes; False at once when
        nothing runs in the background."""
        ...
