"""The consumer group's rebalance listener: the caller's callbacks, on the caller's thread.

kafka-python 3 runs the rebalance listener on its background I/O thread while ``poll()`` or
``close()`` waits for it. The source makes those calls on a worker thread instead
(``rebalance_handoff.LoopHandoff``), and the calling thread (the daemon's loop) runs the
callbacks the call triggers: a revocation finishes and commits the revoked partitions' work on
the loop's own thread, while ``RebalanceListener`` awaits it without blocking the I/O loop
(heartbeats go on). A ``commit()`` made from inside ``on_revoked`` is collected
(``PartitionCallbacks.defer``) and sent by the listener before the partitions are released,
which is what the synchronous contract needs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import structlog

from consumers._kafka import (
    AsyncConsumerRebalanceListener,
    KafkaFuture,
    broker_errors,
    from_kafka_tp,
    io_loop,
    wait_within,
)
from consumers.rebalance_handoff import LoopHandoff
from consumers.records import TopicPartition, partition_names
from consumers.source import PartitionsCallback

log = structlog.get_logger(__name__)

T = TypeVar("T")
Commit = dict[Any, Any]  # kafka-python's offsets argument: TopicPartition -> OffsetAndMetadata


class PartitionCallbacks:
    """The caller's ``on_assigned`` / ``on_revoked``, and what runs around them: the source's
    per-partition state forgotten on a revocation (``forget``), partitions given back sought to
    where their dropped work began (``resume``), partitions given to an early
    join noted until a caller can hear of them (``joining``), commits made inside
    ``on_revoked`` collected for the listener to send."""

    def __init__(
        self,
        forget: Callable[[set[TopicPartition]], None],
        joining: Callable[[], bool],
        resume: Callable[[set[TopicPartition]], None] = lambda tps: None,
    ) -> None:
        self._forget = forget
        self._resume = resume
        self._joining = joining
        self.on_assigned: PartitionsCallback | None = None
        self.on_revoked: PartitionsCallback | None = None
        self._thread: int | None = None  # set while a callback runs
        self._deferred: list[Commit] = []
        self._unannounced: set[TopicPartition] = set()  # assigned before a caller could hear

    def inside(self) -> bool:
        """Whether this thread is running a callback (a consumer call under way waits for it)."""
        return self._thread == threading.get_ident()

    def defer(self, commit: Commit) -> None:
        """A commit made inside ``on_revoked``: sent and awaited by the listener before the
        partitions are released."""
        self._deferred.append(commit)

    def announce(self, assignment: Callable[[], set[TopicPartition]]) -> None:
        """Tell ``on_assigned`` of the partitions an early join was given and still holds."""
        if self._unannounced and self.on_assigned is not None:
            tps, self._unannounced = self._unannounced, set()
            self._run(self.on_assigned, tps & assignment())

    def assigned(self, tps: set[TopicPartition]) -> None:
        if not tps:
            return
        log.info("partitions assigned", partitions=partition_names(tps))
        # Before the caller hears of them: a partition given back is read again from where
        # its dropped work began (``resume_points.py``).
        self._resume(tps)
        if self.on_assigned is None or self._joining():
            # An early join: announced by the first call after it, on its thread.
            self._unannounced |= tps
            return
        self._run(self.on_assigned, tps)

    def revoked(self, tps: set[TopicPartition], lost: bool) -> list[Commit]:
        """Forget the partitions, run ``on_revoked``; the commits it made, for the listener to
        send (none for lost partitions: the group already gave them away)."""
        if not tps:  # kafka-python reports an empty revocation before the first join
            return []
        self._forget(tps)
        event = "partitions lost" if lost else "partitions revoked"
        log.info(event, partitions=partition_names(tps))
        if self._joining():
            # Revoked within an early join: nothing was delivered yet, so nothing to finish.
            self._unannounced -= tps
            return []
        self._deferred = []
        try:
            self._run(self.on_revoked, tps)
        finally:
            commits, self._deferred = self._deferred, []
        if lost and commits:
            log.warning("offsets of lost partitions not committed", partitions=partition_names(tps))
            return []
        return commits

    def _run(self, callback: PartitionsCallback | None, tps: set[TopicPartition]) -> None:
        if callback is None:
            return
        self._thread = threading.get_ident()
        try:
            callback(tps)
        finally:
            self._thread = None


class RebalanceListener(AsyncConsumerRebalanceListener):  # type: ignore[misc]
    """On kafka-python's I/O thread: hands each callback to the thread waiting in the consumer
    call (``LoopHandoff``), awaits it, then sends the commits it made and awaits those, for
    ``commit_limit_s()`` at most."""

    def __init__(
        self,
        callbacks: PartitionCallbacks,
        consumer: Any,
        handoff: LoopHandoff,
        servers: list[str],
        commit_limit_s: Callable[[], float],
    ) -> None:
        self._callbacks = callbacks
        self._consumer = consumer
        self._handoff = handoff
        self._servers = servers
        self._commit_limit_s = commit_limit_s

    async def on_partitions_revoked(self, revoked: Any) -> None:
        tps = {from_kafka_tp(tp) for tp in revoked}
        commits = await self._on_caller(lambda: self._callbacks.revoked(tps, lost=False))
        await self._commit(commits)

    async def on_partitions_lost(self, lost: Any) -> None:
        tps = {from_kafka_tp(tp) for tp in lost}
        await self._on_caller(lambda: self._callbacks.revoked(tps, lost=True))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        tps = {from_kafka_tp(tp) for tp in assigned}
        await self._on_caller(lambda: self._callbacks.assigned(tps))

    async def _on_caller(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the thread waiting in the consumer call, or here when none is (an early
        join, whose callbacks only note what they are given) or the I/O loop cannot be
        reached (a kafka-python rename; logged once)."""
        loop = io_loop(self._consumer)
        if loop is None:
            return fn()
        future = KafkaFuture()

        def run() -> None:
            try:
                value = fn()
            except BaseException as exc:  # raised in the listener, on the I/O thread
                loop.call_soon(lambda failed=exc: future.failure(failed))
            else:
                loop.call_soon(lambda: future.success(value))

        if not self._handoff.post(run):
            return fn()
        result: T = await future
        return result

    async def _commit(self, commits: list[Commit]) -> None:
        deadline = time.monotonic() + self._commit_limit_s()
        for offsets in commits:
            try:
                with broker_errors("committing offsets", self._servers):
                    future = self._consumer.commit_async(offsets=offsets)
                remaining = max(0.0, deadline - time.monotonic())
                await wait_within(self._consumer, future, remaining)
            except Exception as exc:
                # The new owner re-reads from the last good commit: duplicates, not loss.
                log.warning("commit on revocation failed", error=str(exc))
