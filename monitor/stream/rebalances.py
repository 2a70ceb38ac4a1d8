"""What the daemon's loop does when its partition assignment changes.

A revoke finishes the revoked partitions' judge calls under way (up to the revoke wait) and
commits, before the partitions can move to another consumer; the next poll releases what is
still owned and forgets what went elsewhere; a source that re-delivers from an earlier offset
is tracked afresh. Everything here runs on the loop's thread: the source calls its rebalance
listener inside ``poll()`` or ``close()`` (see ``Rebalances.revoked``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection

import structlog

from consumers.offsets import OffsetTracker
from consumers.records import RawMessage, TopicPartition, partition_names
from consumers.source import TurnSource
from consumers.unreadable import REASONS as UNREADABLE_REASONS
from monitor.runtime.clock import Clock, Deadline
from monitor.stream.pipeline import Pipeline
from monitor.stream.recorder import StreamRecorder
from monitor.stream.steps.base import Envelope

log = structlog.get_logger(__name__)

PROGRESS_WAIT_S = 0.02  # between polls of the pipeline while revoked calls finish


class Rebalances:
    """The loop's side of the rebalance protocol (``monitor.stream.steps.rebalance``): it holds,
    releases and discards the pipeline's turns, and forgets partitions in the offset tracker
    and in the backlog (records read but not yet handed to the pipeline)."""

    def __init__(
        self,
        source: TurnSource,
        pipeline: Pipeline,
        tracker: OffsetTracker,
        backlog: deque[Envelope[RawMessage]],
        metrics: StreamRecorder,
        clock: Clock,
        *,
        revoke_wait_s: float,
        stopping: Callable[[], bool],
    ) -> None:
        self._source = source
        self._pipeline = pipeline
        self._tracker = tracker
        self._backlog = backlog
        self._metrics = metrics
        self._clock = clock
        self._revoke_wait = revoke_wait_s
        self._stopping = stopping
        self._holding = False  # a revoke held queued judge work back until the new assignment
        # A revoke's new assignment not announced yet. Until then the source may still list the
        # revoked partitions (kafka-python keeps them in the consumer's assignment until the
        # group's new one arrives, and a poll can return in between): releasing the held turns
        # then would start them while the group hands the partitions to another consumer,
        # which reads them from the commit and judges them again.
        self._assignment_due = False
        # Draining: a revoke (during the drain's polls) finishes the revoked partitions' calls
        # within what is left of this.
        self.drain_deadline: Deadline | None = None

    def assigned(self, tps: Collection[TopicPartition]) -> None:
        self._assignment_due = False
        # Offsets need no set-up (tracked from the first record read); the metrics do.
        self._metrics.prime(topics={tp.topic for tp in tps})
        self._metrics.prime_unreadable({tp.topic for tp in tps}, UNREADABLE_REASONS)

    def revoked(self, tps: Collection[TopicPartition]) -> None:
        """Finish the revoked partitions' turns being judged (up to ``revoke_timeout_seconds``),
        then commit what is finished, before the partitions can move to another consumer.

        Waiting is arroyo's join-on-revoke: without it the new owner re-reads the turns still
        being judged here and judges them again, paying twice (the store keeps one verdict).
        Turns still running when the wait runs out are abandoned and counted. Records not yet
        handed to the pipeline (the backlog) cost nothing and are not waited for. Tracking and
        the backlog are kept: kafka-python keeps a partition's fetch position
        when the rebalance hands it back, so the records held here are the only copy this
        consumer will get. Partitions that went elsewhere are forgotten once the new
        assignment is known (``after_poll``), and a source that rewinds is detected
        (``rewound``). Runs on the loop thread itself, inside ``source.poll()`` or
        ``close()`` (the source's contract: the Kafka source runs the consumer call on a worker
        thread and hands the callback back here), so nothing is touched concurrently.

        During the drain, whose polls run it too, the wait ends with the drain's budget, and
        the turns not started are dropped rather than held: nothing new is started for a
        partition that may have moved, and whoever reads it next (this group, after the
        restart) reads them from the commit. Once the drain is over (the source closing) there
        is nothing left to wait for.
        """
        if not self._stopping():
            self._finish_revoked(set(tps))
        elif self.drain_deadline is not None:
            self._finish_revoked(set(tps))
            self._holding = False
            self._pipeline.discard(tps)
        self._pipeline.commit()

    def _finish_revoked(self, tps: set[TopicPartition]) -> None:
        # Queued turns wait for the new assignment (judged if the partition comes back,
        # dropped if it went elsewhere); calls under way are finished and stored.
        self._pipeline.hold(tps)
        self._holding = True
        self._assignment_due = True
        wait = self._revoke_wait
        if self.drain_deadline is not None:
            wait = min(wait, self.drain_deadline.remaining() or 0.0)
        deadline = Deadline(wait, self._clock)
        running = self._pipeline.judging_in(tps)
        if running:
            log.info("revoked partitions: finishing judge calls under way", n=running)
        while running:
            remaining = deadline.remaining() or 0.0
            if remaining <= 0:
                self._metrics.record_revoke_abandoned(running)
                log.warning("revoke wait ran out; these turns will be judged again", n=running)
                break
            self._pipeline.wait_progress(min(PROGRESS_WAIT_S, remaining))
            self._pipeline.poll()
            running = self._pipeline.judging_in(tps)
        self._pipeline.poll()  # store what just finished, so the commit below includes it

    def after_poll(self) -> None:
        """What a poll may have changed: the assignment (a rebalance ran inside it)."""
        self._forget_unowned()
        if self._holding and not self._assignment_due:
            # A revoke held queued turns back, and the new assignment is known: what is still
            # owned goes on (what went elsewhere was forgotten just above, with its turns).
            self._holding = False
            self._pipeline.release(self._source.assignment())

    def _forget(self, tps: set[TopicPartition]) -> None:
        self._tracker.revoke(tps)
        self._pipeline.discard(tps)  # queued turns: re-read (rewind) or someone else's now
        # In place: the loop holds the deque's bound methods.
        kept = [m for m in self._backlog if m.tp not in tps]
        self._backlog.clear()
        self._backlog.extend(kept)

    def _forget_unowned(self) -> None:
        """Drop partitions a rebalance gave to another consumer (their new owner re-reads
        from our last commit; the store deduplicates any overlap)."""
        gone = self._tracker.partitions() - self._source.assignment()
        if gone:
            log.info("forgetting partitions now owned elsewhere", partitions=partition_names(gone))
            self._forget(gone)

    def rewound(self, tp: TopicPartition, offset: int) -> None:
        """The source re-delivers from an earlier offset (its position was reset to the
        committed one, e.g. after the group lost this member): start tracking afresh. Copies
        still in the pipeline finish as before; their late ``done`` only marks offsets whose
        turn is already stored, so nothing is committed unfinished."""
        log.info("partition rewound; re-reading", partition=partition_names({tp})[0], offset=offset)
        self._forget({tp})
