"""Finishing the work in flight after a stop without dropping out of the consumer group.

A Kafka consumer that does not call ``poll()`` within ``max.poll.interval.ms`` is taken out of
its group (kafka-python's heartbeat thread sends LeaveGroup and forgets its generation), and
a commit it makes after that is refused (CommitFailedError): a drain that waited on slow judge
calls for longer than that would lose its final commit, and the next owner of the partitions
would read again every turn the drain finished. So the drain goes on polling, as arroyo's
processor does while backpressure holds its partitions: every assigned partition paused, the
source polled with a short timeout between the pipeline's own polls, until the pipeline holds
nothing ``join`` would wait for or the deadline passes. The daemon then joins (which no
longer waits on anything long) and commits.

A paused consumer returns nothing; what it returns anyway comes from a partition a rebalance
assigned during the poll, not paused yet. It is neither processed nor tracked, so never
committed: the partition's next reader (this group, after the restart) reads it from the last
commit. Such partitions are paused at the next turn of the loop. A revocation during these
polls runs the daemon's revoke handling, as it does in the loop: the revoked partitions' calls
under way are finished and committed before they move. A poll that lands in a group join
waits for it no longer than the drain has left (``join_limit_s``): the join can take
max.poll.interval + 5 s, which would carry the stop past its budget. A source without a group
(a file) just reads nothing while paused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import structlog

from consumers.source import TurnSource
from monitor.errors import TransportError
from monitor.runtime.clock import Backoff, Clock, Deadline, RetryState
from monitor.stream.http import Heartbeat

log = structlog.get_logger(__name__)

# The source's poll while draining: it only keeps the member in its group (all is paused), so
# it should not hold up collecting the verdicts, which is what the drain waits for.
DRAIN_POLL_S = 0.02
# The longest wait for the pipeline's progress between two polls of the source: far below any
# max.poll.interval (kafka-python's floor is a second).
PROGRESS_WAIT_S = 0.2


class Draining(Protocol):
    """What the drain asks of the pipeline (``monitor.stream.pipeline.Pipeline``)."""

    def poll(self) -> None: ...

    def wait_progress(self, timeout: float) -> bool: ...

    @property
    def unfinished(self) -> int: ...


class Drain:
    def __init__(
        self,
        source: TurnSource,
        pipeline: Draining,
        clock: Clock,
        heartbeat: Heartbeat,
        *,
        after_poll: Callable[[], None],
        poll_block_s: float,
        max_records: int,
    ) -> None:
        self._source = source
        self._pipeline = pipeline
        self._clock = clock
        self._heartbeat = heartbeat
        self._after_poll = after_poll  # the daemon's rebalance follow-up (forget, release)
        self._poll_block_s = poll_block_s
        self._max_records = max_records
        self._retry = RetryState(Backoff(1.0, 1.0), clock)
        self._announced = False
        self.left_unread = 0  # records a poll returned anyway, left for the next reader

    def finish(self, deadline: Deadline) -> None:
        """Poll the pipeline until it holds nothing ``join`` waits for, or ``deadline``;
        meanwhile keep the source polled with every partition paused. Nothing to wait for:
        no call to the source at all."""
        while True:
            self._heartbeat.tick()
            self._pipeline.poll()
            remaining = deadline.remaining() or 0.0
            if not self._pipeline.unfinished or remaining <= 0:
                return
            self._keep_alive(deadline)
            remaining = deadline.remaining() or 0.0
            if remaining > 0 and not self._pipeline.wait_progress(min(PROGRESS_WAIT_S, remaining)):
                # Nothing runs in the background (a database retry): the next poll retries.
                self._clock.sleep(min(PROGRESS_WAIT_S, remaining))

    def _pause_all(self) -> int:
        paused = self._source.paused()
        unpaused = self._source.assignment() - paused
        if unpaused:
            self._source.pause(unpaused)
        return len(paused) + len(unpaused)

    def _keep_alive(self, deadline: Deadline) -> None:
        if not self._retry.due():
            return
        paused = self._pause_all()  # a rebalance may have assigned some since the last poll
        if paused and not self._announced:
            self._announced = True
            log.info("draining: partitions paused, the consumer stays in its group", n=paused)
        try:
            # A poll that lands in a rebalance waits for the join: no longer than the drain
            # has left, or the stop would outlast its budget (a join cut short is no loss
            # here: the member is leaving the group).
            with self._heartbeat.excused(self._poll_block_s):
                records = self._source.poll(
                    DRAIN_POLL_S, self._max_records, join_limit_s=deadline.remaining() or 0.0
                )
        except TransportError as exc:
            delay = self._retry.failed()
            log.warning(
                "polling the broker while draining failed; retrying",
                error=str(exc),
                retry_in_s=delay,
            )
            return
        self._retry.succeeded()
        if records:
            self.left_unread += len(records)
            log.info("records read while draining are left for the next reader", n=len(records))
        self._after_poll()
