"""TurnSource over a Kafka consumer group (kafka-python): the consumer session.

This module polls, commits, pauses and closes, and swaps the consumer when the group is
rejoined; the rest of the intake wing is in modules of their own: opening a consumer of the
group and telling which broker it talks to (``group_consumer.py``, ``broker_quirks.py``), the
early join (``early_join.py``), the record reader (``_kafka_records.py``), the rebalance
listener (``rebalance_listener.py`` over ``rebalance_handoff.py``), pause state
(``partition_pauses.py``), unreadable-batch holds
(``unreadable_holds.py``), the lag meter (``lag_meter.py``), the stuck-group decision
(``group_rejoin.py``) and the readiness ping (``broker_ping.py``).

The source tracks no offsets of its own: the pipeline's ``OffsetTracker`` does, and lag reads
kafka-python's position. Every blocking call has a time limit (kafka-python's own defaults
include "forever"): a commit ``commit_timeout_s`` (or the caller's), ``close()``
``close_timeout_s`` for the revocation commit and as much again for leaving the group, so a
stop request ends in bounded time even when the brokers are gone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import structlog

from consumers._kafka import (
    OPTIMISATIONS,
    OffsetAndMetadata,
    UnreadableBatchError,
    broker_errors,
    from_kafka_tp,
    require_reachable,
    to_kafka_tp,
    workarounds_off,
)
from consumers._kafka_group import finish_pending_join, forget_membership, take_member_id
from consumers._kafka_records import to_raw
from consumers.broker_ping import BrokerPing
from consumers.early_join import EarlyJoin
from consumers.group_consumer import has_tansu_quirks, subscribed_consumer
from consumers.group_health import Rejoin, RejoinListener
from consumers.group_rejoin import RejoinPlan, StuckGroup, member_id
from consumers.lag_meter import LagMeter
from consumers.partition_pauses import PartitionPauses
from consumers.patch_fallbacks import fallback_states
from consumers.rebalance_handoff import LoopHandoff
from consumers.rebalance_listener import PartitionCallbacks, RebalanceListener
from consumers.records import RawMessage, TopicPartition, partition_names
from consumers.resume_points import ResumePoints
from consumers.source import PartitionsCallback
from consumers.unreadable import (
    INITIAL_BACKOFF_S,
    MAX_BACKOFF_S,
    UnreadableBatch,
    UnreadableListener,
)
from consumers.unreadable_holds import UnreadableHolds
from monitor.config.kafka import KafkaConfig
from monitor.errors import BrokerError
from monitor.runtime.clock import SystemClock

log = structlog.get_logger(__name__)

T = TypeVar("T")

# Lag is recomputed from cached highwater marks at most this often.
LAG_REFRESH_S = 1.0
CLOSE_TIMEOUT_S = 5.0


class KafkaTurnSource:
    def __init__(
        self,
        config: KafkaConfig,
        *,
        connect_timeout_s: float = 30.0,
        commit_timeout_s: float = 30.0,
        close_timeout_s: float = CLOSE_TIMEOUT_S,
        lag_refresh_s: float = LAG_REFRESH_S,
        unreadable_backoff_s: tuple[float, float] = (INITIAL_BACKOFF_S, MAX_BACKOFF_S),
    ) -> None:
        self._config = config
        self._servers = list(config.bootstrap_servers)
        self._commit_timeout_s = commit_timeout_s
        self._close_timeout_s = close_timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._join_timeout_ms = config.join_timeout_ms
        self._lag = LagMeter(lag_refresh_s)
        self._ping = BrokerPing(self._servers)
        self._closed = False
        self._early = EarlyJoin(self._servers, self._join_timeout_ms)
        # Partitions the caller paused (backpressure), and those held back on a batch they
        # cannot read: a held partition is resumed when its retry is due, not before.
        self._pauses = PartitionPauses()
        self._holds = UnreadableHolds(SystemClock(), unreadable_backoff_s, self._pauses)
        # Where a partition given back after a rebalance is read again (resume_points.py).
        self._resume = ResumePoints()
        self._callbacks = PartitionCallbacks(
            self._forget, lambda: self._early.joining, self._seek_given_back
        )
        self._on_unreadable: UnreadableListener | None = None
        self._on_rejoin: RejoinListener | None = None
        self._handoff = LoopHandoff()
        # Fail fast (and without leaking kafka-python's I/O thread) when nothing listens.
        require_reachable(self._servers, connect_timeout_s)
        self._consumer = self._subscribed(config.group_instance_id)
        try:
            self.tansu_quirks = has_tansu_quirks(self._consumer, config)
        except BaseException:  # not left to the garbage collector with its sockets open
            self._consumer.close(autocommit=False, timeout_ms=int(close_timeout_s * 1000))
            raise
        # A group that does not form is joined again, after a bound that depends on the broker.
        self._stuck = StuckGroup(config, close_timeout_s, tansu=self.tansu_quirks)
        self._stuck.watch(self._consumer)

    def _subscribed(self, group_instance_id: str | None) -> Any:
        def listener(consumer: Any) -> RebalanceListener:
            return RebalanceListener(
                self._callbacks, consumer, self._handoff, self._servers, self._commit_limit_s
            )

        return subscribed_consumer(
            self._config,
            group_instance_id,
            listener,
            connect_timeout_s=self._connect_timeout_s,
            close_timeout_s=self._close_timeout_s,
        )

    def _commit_limit_s(self) -> float:
        """How long the listener waits for a revocation's commits: once closing, the close
        limit."""
        return self._close_timeout_s if self._closed else self._commit_timeout_s

    def start_join(self) -> None:
        """Join the group now, on a thread, while the caller gets the rest ready
        (``early_join.py``). Every other method waits for the join to end before touching the
        consumer; the partitions it is given are announced to the listener by the first call
        after it."""
        if not self._closed:
            self._early.start(self._consumer)

    def _settle(self) -> None:
        """Wait for an early join; then tell the listener about partitions it missed."""
        if self._callbacks.inside():
            return  # inside a callback, which a consumer call under way is waiting for
        self._early.wait()
        consumer = self._consumer
        self._callbacks.announce(lambda: {from_kafka_tp(tp) for tp in consumer.assignment()})

    def _call(self, fn: Callable[[], T]) -> T:
        """A consumer call that may run the rebalance listener: on the worker thread, with
        the callbacks on this one."""
        return self._handoff.call(fn)

    # ------------------------------------------------------------------ TurnSource

    def poll(
        self, timeout_s: float, max_records: int, *, join_limit_s: float | None = None
    ) -> list[RawMessage]:
        self._settle()
        if self._holds:
            self._holds.sync(self._consumer)
        consumer = self._consumer
        timeout_ms = max(0, int(timeout_s * 1000))
        join_ms = self._join_timeout_ms
        if join_limit_s is not None:
            join_ms = min(join_ms, max(0, int(join_limit_s * 1000)))

        def poll() -> Any:
            # During a rebalance this may block past timeout_s: bounded by the join timeout, or
            # by the caller's limit (a join cut short is taken up again by the next poll; a
            # draining daemon makes none, it leaves the group).
            finish_pending_join(consumer, join_ms)
            return consumer.poll(timeout_ms=timeout_ms, max_records=max_records)

        with broker_errors("polling", self._servers):
            try:
                batches = self._call(poll)
            except UnreadableBatchError as exc:  # no records came with it: see _kafka_fetch.py
                self._hold_unreadable(exc)
                batches = {}
        out: list[RawMessage] = []
        for records in batches.values():
            if not records:
                continue
            # RawMessage already (``_kafka_records.py``) unless the consumer kept the
            # library's reader
            first = records[0]
            self._resume.delivered(TopicPartition(first.topic, first.partition), first.offset)
            out += records if type(first) is RawMessage else map(to_raw, records)
            if self._holds:
                last = records[-1]
                self._holds.delivered(TopicPartition(last.topic, last.partition), last.offset)
        self._lag.refresh(self._consumer)
        plan = self._stuck.check(self._consumer)
        if plan is not None:
            self._rejoin(plan)
        return out

    def commit(self, offsets: Mapping[TopicPartition, int], timeout_s: float | None = None) -> None:
        if not offsets:
            return
        payload = {to_kafka_tp(tp): OffsetAndMetadata(off, "", -1) for tp, off in offsets.items()}
        self._resume.committed(offsets)
        if self._callbacks.inside():
            # Inside on_revoked: sent and awaited by the listener before it returns.
            self._callbacks.defer(payload)
            return
        self._settle()
        timeout_ms = int(1000 * (self._commit_timeout_s if timeout_s is None else timeout_s))
        with broker_errors("committing offsets", self._servers):
            self._consumer.commit(offsets=payload, timeout_ms=max(1, timeout_ms))

    def pause(self, tps: Iterable[TopicPartition]) -> None:
        tps = set(tps)
        if tps:
            self._settle()
            self._consumer.pause(*(to_kafka_tp(tp) for tp in self._pauses.pause(tps)))

    def resume(self, tps: Iterable[TopicPartition]) -> None:
        tps = set(tps)
        if tps:
            self._settle()
            # A partition held on an unreadable batch stays paused until its retry is due.
            ktps = [to_kafka_tp(tp) for tp in self._pauses.resume(tps, self._holds.held())]
            if ktps:
                self._consumer.resume(*ktps)

    def paused(self) -> set[TopicPartition]:
        """Partitions the caller paused (those held on an unreadable batch are not theirs to
        resume: see ``unreadable()``)."""
        self._settle()
        paused = {from_kafka_tp(tp) for tp in self._consumer.paused()}
        return self._pauses.visible(paused, self._holds.held()) if self._holds else paused

    def set_rejoin_listener(self, listener: RejoinListener) -> None:
        self._on_rejoin = listener

    def set_unreadable_listener(self, listener: UnreadableListener) -> None:
        self._on_unreadable = listener

    def unreadable(self) -> dict[TopicPartition, UnreadableBatch]:
        return self._holds.snapshot()

    @property
    def member_id(self) -> str:
        """This consumer's member id in its group ('' before it joined). Kafka gives a static
        member (``group_instance_id``) that rejoins under its name a new member id, and fences
        the instance that held the old one."""
        self._settle()
        return member_id(self._consumer)

    def assignment(self) -> set[TopicPartition]:
        self._settle()
        return {from_kafka_tp(tp) for tp in self._consumer.assignment()}

    def partition_count(self, topic: str) -> int | None:
        """How many partitions ``topic`` has, from the client's metadata (None: unknown).
        With ``assignment``, whether this member reads every partition of a topic: an OTLP
        trace written unkeyed is known whole only then (``monitor/stream/steps/assemble.py``)."""
        self._settle()
        try:
            with broker_errors(f"reading the partitions of {topic}", self._servers):
                partitions = self._consumer.partitions_for_topic(topic)
        except BrokerError:
            return None
        return len(partitions) or None

    def lag(self) -> dict[TopicPartition, int]:
        return self._lag.lag()

    def patch_fallbacks(self) -> dict[str, bool]:
        """The optimisations (False) and every patch that fell back in this process (True)."""
        return fallback_states(OPTIMISATIONS, workarounds_off())

    def set_rebalance_listener(
        self, on_assigned: PartitionsCallback, on_revoked: PartitionsCallback
    ) -> None:
        self._callbacks.on_assigned = on_assigned
        self._callbacks.on_revoked = on_revoked

    def ping(self) -> bool:
        return self._ping()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True  # from now on, revocation commits wait close_timeout_s at most
        self._settle()
        consumer = self._consumer
        try:
            with broker_errors("closing the consumer", self._servers):
                # The limit covers leaving the group; the revocation commit has its own.
                timeout_ms = int(self._close_timeout_s * 1000)
                self._call(lambda: consumer.close(autocommit=False, timeout_ms=timeout_ms))
        except Exception as exc:
            log.warning("closing the Kafka consumer failed", error=str(exc))
        finally:
            self._handoff.close()

    # ------------------------------------------------------------------ internals

    def _rejoin(self, plan: RejoinPlan) -> None:
        """Leave a group that has not formed and join it again with a fresh consumer: as a
        dynamic member (a new member id: the broker's stale state for the old one no longer
        matters; static membership comes back with the next restart of the process), or, with
        Tansu's quirks on, in the place of a leader the group no longer has
        (``consumers/group_rejoin.py``)."""
        try:
            fresh = self._subscribed(None)  # first: if the broker is gone, keep what there is
        except BrokerError as exc:
            log.warning("rejoining failed; retried after the next bound", error=str(exc))
            return
        self._stuck.watch(fresh)
        if plan.how is Rejoin.TAKE_OVER and plan.leader is not None:
            take_member_id(fresh, plan.leader)
        old = self._consumer
        if not plan.leave:
            # Tansu: it leads the round it gives up, and a LeaveGroup now would leave Tansu
            # naming a departed leader (_kafka_group.py); a member that just stops is expired.
            forget_membership(old)
        try:
            with broker_errors("leaving the stuck group", self._servers):
                # Revokes what is still assigned (the rebalance listener commits it first).
                timeout_ms = int(self._close_timeout_s * 1000)
                self._call(lambda: old.close(autocommit=False, timeout_ms=timeout_ms))
        except Exception as exc:
            log.warning("closing the stuck consumer failed", error=str(exc))
        forgotten = set(self._lag.lag()) | set(self._holds.snapshot())
        self._lag.forget(forgotten)
        self._holds.forget(forgotten)
        self._pauses.clear()
        self._resume.clear()
        self._consumer = fresh
        if self._on_rejoin is not None:
            self._on_rejoin()

    def _hold_unreadable(self, exc: UnreadableBatchError) -> None:
        batch = self._holds.hold(self._consumer, exc)
        if self._on_unreadable is not None:
            self._on_unreadable(batch)

    def _seek_given_back(self, tps: set[TopicPartition]) -> None:
        """Partitions this consumer held before the rebalance and holds again keep their
        fetch position in kafka-python: seek each back to where its unfinished (dropped)
        work began, so that nothing below the commit is left unread."""
        seeks = self._resume.assigned(tps)
        for tp, offset in seeks.items():
            self._consumer.seek(to_kafka_tp(tp), offset)
        if seeks:
            log.info(
                "partitions given back after a rebalance: reading again from their last commit",
                partitions=partition_names(set(seeks)),
            )

    def _forget(self, tps: set[TopicPartition]) -> None:
        """Revoked or lost: what the source kept of the partitions goes with them."""
        self._resume.revoked(tps)
        self._lag.forget(tps)
        self._holds.forget(tps)
        self._pauses.forget(tps)
