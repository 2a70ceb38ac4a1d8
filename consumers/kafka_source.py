"""TurnSource over a Kafka consumer group (kafka-python): the consumer session.

This module joins the group, polls, commits and listens for rebalances; the rest of the
intake wing is in modules of their own: pause state (``partition_pauses.py``), unreadable-batch
holds (``unreadable_holds.py``), the lag meter (``lag_meter.py``), the stuck-group decision
(``group_rejoin.py``) and which broker this is (``broker_quirks.py``).

Offsets are committed only when the pipeline says so (``enable_auto_commit=False``), so a
message is never marked read before it is finished. The source tracks no offsets of its own:
the pipeline's ``OffsetTracker`` does, and lag reads kafka-python's position.

Rebalance callbacks: kafka-python 3 runs the rebalance listener on its background I/O thread
while ``poll()`` or ``close()`` waits for it. Here those calls run on a worker thread instead
(``rebalance_handoff.LoopHandoff``), and the calling thread (the daemon's loop) runs the
callbacks the call triggers: a revocation finishes and commits the revoked partitions' work on
the loop's own thread, while the listener awaits it without blocking the I/O loop (heartbeats
go on). A ``commit()`` made from inside ``on_revoked`` is collected and sent by the listener
before the partitions are released, which is what the synchronous contract needs.

Every blocking call has a time limit (kafka-python's own defaults include "forever"): a commit
``commit_timeout_s`` (or the caller's), ``close()`` ``close_timeout_s`` for the revocation
commit and as much again for leaving the group, so a stop request ends in bounded time even
when the brokers are gone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import structlog

from consumers._kafka import (
    AsyncConsumerRebalanceListener,
    KafkaConsumer,
    KafkaFuture,
    OffsetAndMetadata,
    UnreadableBatchError,
    any_reachable,
    broker_errors,
    client_options,
    cluster_id,
    from_kafka_tp,
    io_loop,
    require_reachable,
    to_kafka_tp,
    wait_within,
)
from consumers._kafka_group import (
    finish_pending_join,
    forget_membership,
    join_group,
    take_member_id,
)
from consumers.broker_quirks import tansu_quirks
from consumers.group_health import Rejoin, RejoinListener
from consumers.group_rejoin import RejoinPlan, StuckGroup, member_id
from consumers.lag_meter import LagMeter
from consumers.partition_pauses import PartitionPauses
from consumers.rebalance_handoff import LoopHandoff
from consumers.records import RawMessage, TopicPartition
from consumers.source import PartitionsCallback
from consumers.unreadable import (
    INITIAL_BACKOFF_S,
    MAX_BACKOFF_S,
    UnreadableBatch,
    UnreadableListener,
)
from consumers.unreadable_holds import UnreadableHolds
from monitor.clock import SystemClock
from monitor.errors import BrokerError
from monitor.settings import KafkaConfig

log = structlog.get_logger(__name__)

T = TypeVar("T")

# How long ping() trusts its last answer: /readyz may be scraped every second.
PING_CACHE_S = 2.0
PING_CONNECT_TIMEOUT_S = 1.0
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
        self._join_timeout_ms = config.join_timeout_ms
        self._on_assigned: PartitionsCallback | None = None
        self._on_revoked: PartitionsCallback | None = None
        # Set while a user callback runs; commit() made from it is collected, not sent.
        self._listener_thread: int | None = None
        self._deferred_commits: list[dict[Any, Any]] = []
        self._lag = LagMeter(lag_refresh_s)
        self._ping: tuple[float, bool] | None = None
        self._closed = False
        self._joiner: threading.Thread | None = None
        self._joining = False  # an early join is under way (start_join)
        self._unannounced: set[TopicPartition] = set()  # assigned before a listener could hear
        # Partitions the caller paused (backpressure), and those held back on a batch they
        # cannot read: a held partition is resumed when its retry is due, not before.
        self._pauses = PartitionPauses()
        self._holds = UnreadableHolds(SystemClock(), unreadable_backoff_s, self._pauses)
        self._on_unreadable: UnreadableListener | None = None
        self._on_rejoin: RejoinListener | None = None
        self._handoff = LoopHandoff()
        self._connect_timeout_s = connect_timeout_s
        # Fail fast (and without leaking kafka-python's I/O thread) when nothing listens.
        require_reachable(self._servers, connect_timeout_s)
        self._consumer = self._subscribed(config.group_instance_id)
        try:
            self.tansu_quirks = self._tansu_quirks()
        except BaseException:  # not left to the garbage collector with its sockets open
            self._consumer.close(autocommit=False, timeout_ms=int(close_timeout_s * 1000))
            raise
        # A group that does not form is joined again, after a bound that depends on the broker.
        self._stuck = StuckGroup(config, close_timeout_s, tansu=self.tansu_quirks)
        self._stuck.watch(self._consumer)

    def _tansu_quirks(self) -> bool:
        """Whether the embedded broker's workarounds are on (``kafka.broker_quirks``)."""
        setting = self._config.broker_quirks
        found = None
        if setting == "auto":
            try:
                with broker_errors("asking the brokers for the cluster id", self._servers):
                    found = cluster_id(self._consumer, self._config.topic_names[0])
            except BrokerError as exc:  # not Tansu's then: Kafka's semantics are the safe side
                log.warning("cannot tell which broker this is; quirks off", error=str(exc))
        on = tansu_quirks(setting, found)
        log.info("broker quirks", setting=setting, cluster_id=found, tansu=on)
        return on

    def _subscribed(self, group_instance_id: str | None) -> Any:
        """A consumer of the group, subscribed to the topics with the rebalance listener."""
        config = self._config
        with broker_errors("connecting the consumer", self._servers):
            consumer = KafkaConsumer(
                **client_options(config),
                group_id=config.group_id,
                enable_auto_commit=False,
                auto_offset_reset=config.auto_offset_reset,
                session_timeout_ms=config.session_timeout_ms,
                heartbeat_interval_ms=config.heartbeat_interval_ms,
                max_poll_interval_ms=config.max_poll_interval_ms,
                max_poll_records=config.max_poll_records,
                fetch_max_wait_ms=config.fetch_max_wait_ms,
                bootstrap_timeout_ms=int(self._connect_timeout_s * 1000),
                # None: a dynamic member, which leaves the group on close(); a static one stays
                # (until its session times out) so its restart takes the partitions back.
                group_instance_id=group_instance_id,
            )
        try:
            with broker_errors("subscribing", self._servers):
                consumer.subscribe(topics=config.topic_names, listener=_Listener(self, consumer))
        except BaseException:
            consumer.close(autocommit=False, timeout_ms=int(self._close_timeout_s * 1000))
            raise
        return consumer

    def start_join(self) -> None:
        """Join the group now, on a thread, while the caller gets the rest ready.

        A join round is the broker's to time (on Tansu 0.6 a static member's takes half the
        session timeout plus 3 s), so a restarted daemon that joins first and opens its store,
        judge clients and probe server meanwhile reaches its first verdict that much sooner.
        Every other method waits for the join to end before touching the consumer (it is not
        thread-safe); a join that fails or times out is simply redone by the next ``poll()``.
        The partitions it is given are announced to the listener by the first call after it.
        """
        if self._joiner is not None or self._closed:
            return
        self._joining = True
        self._joiner = threading.Thread(target=self._join, name="kafka-join", daemon=True)
        self._joiner.start()

    def _join(self) -> None:
        try:
            with broker_errors("joining the group", self._servers):
                joined = join_group(self._consumer, self._join_timeout_ms)
            log.info("joined the consumer group" if joined else "group join not finished yet")
        except Exception as exc:  # the loop's first poll joins again and reports failures
            log.warning("joining the consumer group failed; retrying on poll", error=str(exc))
        finally:
            self._joining = False

    def _settle(self) -> None:
        """Wait for an early join; then tell the listener about partitions it missed."""
        if self._listener_thread == threading.get_ident():
            return  # inside a callback, which a consumer call under way is waiting for
        joiner = self._joiner
        if joiner is not None and joiner is not threading.current_thread():
            joiner.join()  # bounded: the join has its timeout
            self._joiner = None
        if self._unannounced and self._on_assigned is not None:
            tps, self._unannounced = self._unannounced, set()
            self._run_callback(self._on_assigned, tps & self.assignment())

    def _call(self, fn: Callable[[], T]) -> T:
        """A consumer call that may run the rebalance listener: on the worker thread, with
        the callbacks on this one."""
        return self._handoff.call(fn)

    # ------------------------------------------------------------------ TurnSource

    def poll(self, timeout_s: float, max_records: int) -> list[RawMessage]:
        self._settle()
        if self._holds:
            self._holds.sync(self._consumer)
        consumer = self._consumer
        timeout_ms = max(0, int(timeout_s * 1000))

        def poll() -> Any:
            # During a rebalance this may block past timeout_s (bounded by the join timeout).
            finish_pending_join(consumer, self._join_timeout_ms)
            return consumer.poll(timeout_ms=timeout_ms, max_records=max_records)

        with broker_errors("polling", self._servers):
            try:
                batches = self._call(poll)
            except UnreadableBatchError as exc:  # no records came with it: see _kafka.py
                self._hold_unreadable(exc)
                batches = {}
        out: list[RawMessage] = []
        for records in batches.values():
            for r in records:
                out.append(_to_raw(r))
            if records and self._holds:
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
        if self._listener_thread == threading.get_ident():
            # Inside on_revoked: sent and awaited by the listener before it returns.
            self._deferred_commits.append(payload)
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

    def lag(self) -> dict[TopicPartition, int]:
        return self._lag.lag()

    def set_rebalance_listener(
        self, on_assigned: PartitionsCallback, on_revoked: PartitionsCallback
    ) -> None:
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked

    def ping(self) -> bool:
        now = time.monotonic()
        cached = self._ping
        if cached is not None and now - cached[0] < PING_CACHE_S:
            return cached[1]
        ok = any_reachable(self._servers, PING_CONNECT_TIMEOUT_S)
        self._ping = (now, ok)
        return ok

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
        self._consumer = fresh
        if self._on_rejoin is not None:
            self._on_rejoin()

    def _hold_unreadable(self, exc: UnreadableBatchError) -> None:
        batch = self._holds.hold(self._consumer, exc)
        if self._on_unreadable is not None:
            self._on_unreadable(batch)

    def _run_callback(self, callback: PartitionsCallback | None, tps: set[TopicPartition]) -> None:
        if callback is None:
            return
        self._listener_thread = threading.get_ident()
        try:
            callback(tps)
        finally:
            self._listener_thread = None

    def _assigned(self, tps: set[TopicPartition]) -> None:
        if not tps:
            return
        log.info("partitions assigned", partitions=_names(tps))
        if self._on_assigned is None or self._joining:
            # An early join (start_join): announced by the first call after it, on its thread.
            self._unannounced |= tps
            return
        self._run_callback(self._on_assigned, tps)

    def _revoked(self, tps: set[TopicPartition], lost: bool) -> list[dict[Any, Any]]:
        """Forget the partitions, run the caller's ``on_revoked``; the commits it made, for the
        listener to send (none for lost partitions: the group already gave them away)."""
        if not tps:  # kafka-python reports an empty revocation before the first join
            return []
        self._lag.forget(tps)
        self._holds.forget(tps)
        self._pauses.forget(tps)
        log.info("partitions lost" if lost else "partitions revoked", partitions=_names(tps))
        if self._joining:
            # Revoked within an early join: nothing was delivered yet, so nothing to finish.
            self._unannounced -= tps
            return []
        self._deferred_commits = []
        try:
            self._run_callback(self._on_revoked, tps)
        finally:
            commits, self._deferred_commits = self._deferred_commits, []
        if lost and commits:
            log.warning("offsets of lost partitions not committed", partitions=_names(tps))
            return []
        return commits


class _Listener(AsyncConsumerRebalanceListener):  # type: ignore[misc]
    """On kafka-python's I/O thread: hands each callback to the thread waiting in the consumer
    call (``LoopHandoff``), awaits it, then sends the commits it made and awaits those."""

    def __init__(self, source: KafkaTurnSource, consumer: Any) -> None:
        self._source = source
        self._consumer = consumer

    async def on_partitions_revoked(self, revoked: Any) -> None:
        tps = {from_kafka_tp(tp) for tp in revoked}
        commits = await self._on_caller(lambda: self._source._revoked(tps, lost=False))
        await self._commit(commits)

    async def on_partitions_lost(self, lost: Any) -> None:
        tps = {from_kafka_tp(tp) for tp in lost}
        await self._on_caller(lambda: self._source._revoked(tps, lost=True))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        tps = {from_kafka_tp(tp) for tp in assigned}
        await self._on_caller(lambda: self._source._assigned(tps))

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

        if not self._source._handoff.post(run):
            return fn()
        result: T = await future
        return result

    async def _commit(self, commits: list[dict[Any, Any]]) -> None:
        source = self._source
        limit = source._close_timeout_s if source._closed else source._commit_timeout_s
        deadline = time.monotonic() + limit
        for offsets in commits:
            try:
                with broker_errors("committing offsets", source._servers):
                    future = self._consumer.commit_async(offsets=offsets)
                remaining = max(0.0, deadline - time.monotonic())
                await wait_within(self._consumer, future, remaining)
            except Exception as exc:
                # The new owner re-reads from the last good commit: duplicates, not loss.
                log.warning("commit on revocation failed", error=str(exc))


def _to_raw(record: Any) -> RawMessage:
    # Called for every record: positional arguments, and no generator for the usual no headers.
    raw_headers = record.headers
    headers = (
        tuple((str(k), bytes(v) if v is not None else b"") for k, v in raw_headers)
        if raw_headers
        else ()
    )
    ts = record.timestamp
    return RawMessage(
        record.topic,
        record.partition,
        record.offset,
        record.value,
        record.key,
        headers,
        ts if ts is not None and ts >= 0 else None,
    )


def _names(tps: Iterable[TopicPartition]) -> list[str]:
    return sorted(f"{tp.topic}/{tp.partition}" for tp in tps)
