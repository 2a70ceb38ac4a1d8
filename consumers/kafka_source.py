"""TurnSource over a Kafka consumer group (kafka-python).

Offsets are committed only when the pipeline says so (``enable_auto_commit=False``), so a
message is never marked read before it is finished.

Rebalance callbacks: kafka-python 3 runs its network loop, and with it the rebalance
listener, on a background I/O thread, and a blocking consumer call (such as ``commit``) from
that thread would deadlock. The listener is therefore an async one: the user's callbacks run
inline on the I/O thread (while ``poll()`` or ``close()`` is waiting for it), a ``commit()``
made from inside ``on_revoked`` is sent asynchronously, and the listener awaits it before the
partitions are released, which is what the synchronous contract needs.

Every blocking call has a time limit (kafka-python's own defaults include "forever"): a commit
``commit_timeout_s`` (or the caller's), ``close()`` ``close_timeout_s`` for the revocation
commit and as much again for leaving the group, so a stop request ends in bounded time even
when the brokers are gone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

import structlog

from consumers._kafka import (
    AsyncConsumerRebalanceListener,
    KafkaConsumer,
    OffsetAndMetadata,
    UnreadableBatchError,
    any_reachable,
    broker_errors,
    client_options,
    cluster_id,
    describe_unreadable,
    discard_fetched,
    from_kafka_tp,
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
from consumers.records import RawMessage, TopicPartition
from consumers.source import PartitionsCallback
from consumers.unreadable import (
    INITIAL_BACKOFF_S,
    MAX_BACKOFF_S,
    UnreadableBatch,
    UnreadableListener,
    UnreadablePartitions,
)
from monitor.clock import SystemClock
from monitor.errors import BrokerError
from monitor.settings import KafkaConfig

log = structlog.get_logger(__name__)

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
        # Set while a user callback runs on the I/O thread; commit() checks it.
        self._listener_thread: int | None = None
        self._deferred_commits: list[Any] = []
        self._positions: dict[TopicPartition, int] = {}
        self._lag: dict[TopicPartition, int] = {}
        self._lag_at: float | None = None
        self._lag_refresh_s = lag_refresh_s
        self._ping: tuple[float, bool] | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._joiner: threading.Thread | None = None
        self._unannounced: set[TopicPartition] = set()  # assigned before a listener was set
        # Partitions held back on a batch they cannot read, and those the caller paused
        # (backpressure): a held partition is resumed when its retry is due, not before.
        self._unreadable = UnreadablePartitions(SystemClock(), *unreadable_backoff_s)
        self._on_unreadable: UnreadableListener | None = None
        self._user_paused: set[TopicPartition] = set()
        self._on_rejoin: RejoinListener | None = None
        self._connect_timeout_s = connect_timeout_s
        # Fail fast (and without leaking kafka-python's I/O thread) when nothing listens.
        require_reachable(self._servers, connect_timeout_s)
        self._consumer = self._subscribed(config.group_instance_id)
        self.tansu_quirks = self._tansu_quirks()
        # A group that does not form is joined again, after a bound that depends on the broker.
        self._stuck = StuckGroup(config, close_timeout_s, tansu=self.tansu_quirks)

    def _tansu_quirks(self) -> bool:
        """Whether the embedded broker's workarounds are on (``kafka.broker_quirks``)."""
        setting = self._config.broker_quirks
        found = None
        if setting == "auto":
            try:
                with broker_errors("asking the brokers for the cluster id", self._servers):
                    found = cluster_id(self._consumer, self._config.topics[0])
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
                consumer.subscribe(topics=list(config.topics), listener=_Listener(self))
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
        """
        if self._joiner is not None or self._closed:
            return
        self._joiner = threading.Thread(target=self._join, name="kafka-join", daemon=True)
        self._joiner.start()

    def _join(self) -> None:
        try:
            with broker_errors("joining the group", self._servers):
                joined = join_group(self._consumer, self._join_timeout_ms)
            log.info("joined the consumer group" if joined else "group join not finished yet")
        except Exception as exc:  # the loop's first poll joins again and reports failures
            log.warning("joining the consumer group failed; retrying on poll", error=str(exc))

    def _settle(self) -> None:
        """Wait for an early join; then tell the listener about partitions it missed."""
        if self._listener_thread == threading.get_ident():
            return  # a callback on the I/O thread, which the join itself may be waiting for
        joiner = self._joiner
        if joiner is not None and joiner is not threading.current_thread():
            joiner.join()  # bounded: the join has its timeout
            self._joiner = None
        if self._unannounced and self._on_assigned is not None:
            tps, self._unannounced = self._unannounced, set()
            self._run_callback(self._on_assigned, tps & self.assignment())

    # ------------------------------------------------------------------ TurnSource

    def poll(self, timeout_s: float, max_records: int) -> list[RawMessage]:
        self._settle()
        if self._unreadable:
            self._sync_held()
        with broker_errors("polling", self._servers):
            # During a rebalance this may block past timeout_s (bounded by the join timeout).
            finish_pending_join(self._consumer, self._join_timeout_ms)
            try:
                batches = self._consumer.poll(
                    timeout_ms=max(0, int(timeout_s * 1000)), max_records=max_records
                )
            except UnreadableBatchError as exc:  # no records came with it: see _kafka.py
                self._hold_unreadable(exc)
                batches = {}
        out: list[RawMessage] = []
        for records in batches.values():
            for r in records:
                out.append(_to_raw(r))
            if records:
                last = records[-1]
                tp = TopicPartition(last.topic, last.partition)
                self._positions[tp] = last.offset + 1
                if self._unreadable and (was := self._unreadable.read(tp, last.offset)):
                    log.info(
                        "unreadable partition readable again",
                        topic=was.topic,
                        partition=was.partition,
                        offset=was.offset,
                        attempts=was.attempts,
                    )
        self._maybe_refresh_lag()
        plan = self._stuck.check(self._consumer)
        if plan is not None:
            self._rejoin(plan)
        return out

    def commit(self, offsets: Mapping[TopicPartition, int], timeout_s: float | None = None) -> None:
        if not offsets:
            return
        payload = {to_kafka_tp(tp): OffsetAndMetadata(off, "", -1) for tp, off in offsets.items()}
        if self._listener_thread == threading.get_ident():
            # Inside on_revoked on the I/O thread: awaited by the listener before it returns.
            with broker_errors("committing offsets", self._servers):
                self._deferred_commits.append(self._consumer.commit_async(offsets=payload))
            return
        self._settle()
        timeout_ms = int(1000 * (self._commit_timeout_s if timeout_s is None else timeout_s))
        with broker_errors("committing offsets", self._servers):
            self._consumer.commit(offsets=payload, timeout_ms=max(1, timeout_ms))

    def pause(self, tps: Iterable[TopicPartition]) -> None:
        tps = set(tps)
        if tps:
            self._settle()
            self._user_paused |= tps
            self._consumer.pause(*(to_kafka_tp(tp) for tp in tps))

    def resume(self, tps: Iterable[TopicPartition]) -> None:
        tps = set(tps)
        if tps:
            self._settle()
            self._user_paused -= tps
            # A partition held on an unreadable batch stays paused until its retry is due.
            ktps = [to_kafka_tp(tp) for tp in tps - self._unreadable.held()]
            if ktps:
                self._consumer.resume(*ktps)

    def paused(self) -> set[TopicPartition]:
        """Partitions the caller paused (those held on an unreadable batch are not theirs to
        resume: see ``unreadable()``)."""
        self._settle()
        held = self._unreadable.held() - self._user_paused if self._unreadable else set()
        return {from_kafka_tp(tp) for tp in self._consumer.paused()} - held

    def set_rejoin_listener(self, listener: RejoinListener) -> None:
        self._on_rejoin = listener

    def set_unreadable_listener(self, listener: UnreadableListener) -> None:
        self._on_unreadable = listener

    def unreadable(self) -> dict[TopicPartition, UnreadableBatch]:
        return self._unreadable.snapshot()

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
        with self._lock:
            return dict(self._lag)

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
        try:
            with broker_errors("closing the consumer", self._servers):
                # The limit covers leaving the group; the revocation commit has its own.
                self._consumer.close(autocommit=False, timeout_ms=int(self._close_timeout_s * 1000))
        except Exception as exc:
            log.warning("closing the Kafka consumer failed", error=str(exc))

    # ------------------------------------------------------------------ internals

    def _rejoin(self, plan: RejoinPlan) -> None:
        """Leave a group that has not formed and join it again with a fresh consumer: as a
        dynamic member (a new member id: the broker's stale state for the old one no longer
        matters; static membership comes back with the next restart of the process), or in
        the place of a leader the group no longer has (``consumers/group_rejoin.py``)."""
        try:
            fresh = self._subscribed(None)  # first: if the broker is gone, keep what there is
        except BrokerError as exc:
            log.warning("rejoining failed; retried after the next bound", error=str(exc))
            return
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
                old.close(autocommit=False, timeout_ms=int(self._close_timeout_s * 1000))
        except Exception as exc:
            log.warning("closing the stuck consumer failed", error=str(exc))
        self._forget(set(self._positions) | set(self._lag))
        self._unreadable.forget(set(self._unreadable.snapshot()))
        self._user_paused.clear()
        self._consumer = fresh
        if self._on_rejoin is not None:
            self._on_rejoin()

    def _hold_unreadable(self, exc: UnreadableBatchError) -> None:
        """Pause the partition on its unread batch (its position stays there, so nothing past
        it is read or committed) and schedule a fresh fetch of it after a backoff."""
        tp = exc.tp
        discard_fetched(self._consumer, tp)
        batch = self._unreadable.failed(
            tp, exc.offset, exc.reason, describe_unreadable(exc.reason, exc.cause)
        )
        ktp = to_kafka_tp(tp)
        if ktp in self._consumer.assignment():
            self._consumer.pause(ktp)
        log.error(
            "unreadable record batch: partition held back, other partitions go on",
            topic=tp.topic,
            partition=tp.partition,
            offset=exc.offset,
            reason=exc.reason,
            attempts=batch.attempts,
            retry_in_s=round(batch.retry_at - time.monotonic(), 1),
            error=batch.error,
        )
        if self._on_unreadable is not None:
            self._on_unreadable(batch)

    def _sync_held(self) -> None:
        """Keep held partitions paused; resume those whose retry is due (unless the caller
        paused them too): their next fetch reads the batch again."""
        stuck = self._unreadable.snapshot()
        held = self._unreadable.held()
        assigned = self._consumer.assignment()
        paused = set(self._consumer.paused())
        hold = {to_kafka_tp(tp) for tp in held} & assigned - paused
        retry = {to_kafka_tp(tp) for tp in set(stuck) - held - self._user_paused} & paused
        if hold:
            self._consumer.pause(*hold)
        if retry:
            log.info("retrying unreadable partitions", partitions=_names(map(from_kafka_tp, retry)))
            self._consumer.resume(*retry)

    def _maybe_refresh_lag(self) -> None:
        """Recompute lag from highwater marks the fetches already returned (no request)."""
        now = time.monotonic()
        if self._lag_at is not None and now - self._lag_at < self._lag_refresh_s:
            return
        self._lag_at = now
        lag: dict[TopicPartition, int] = {}
        for ktp in self._consumer.assignment():
            tp = from_kafka_tp(ktp)
            high = self._consumer.highwater(ktp)
            position = self._positions.get(tp)
            if position is None and high is not None:
                # Fetched but nothing delivered yet (e.g. paused): the fetch position is known.
                try:
                    position = self._consumer.position(ktp, timeout_ms=0)
                except Exception:  # best effort: the partition may be mid-rebalance
                    position = None
            if high is not None and position is not None:
                lag[tp] = max(0, int(high) - int(position))
        with self._lock:
            self._lag = lag

    def _forget(self, tps: set[TopicPartition]) -> None:
        with self._lock:
            for tp in tps:
                self._positions.pop(tp, None)
                self._lag.pop(tp, None)

    def _run_callback(self, callback: PartitionsCallback | None, tps: set[TopicPartition]) -> None:
        if callback is None:
            return
        self._listener_thread = threading.get_ident()
        try:
            callback(tps)
        finally:
            self._listener_thread = None

    def _assigned(self, ktps: Iterable[Any]) -> None:
        tps = {from_kafka_tp(tp) for tp in ktps}
        if not tps:
            return
        log.info("partitions assigned", partitions=_names(tps))
        if self._on_assigned is None:  # an early join (start_join) ended before the listener
            self._unannounced |= tps
        self._run_callback(self._on_assigned, tps)

    def _revoked(self, ktps: Iterable[Any], lost: bool) -> list[Any]:
        tps = {from_kafka_tp(tp) for tp in ktps}
        if not tps:  # kafka-python reports an empty revocation before the first join
            return []
        self._forget(tps)
        self._unreadable.forget(tps)
        self._user_paused -= tps
        log.info("partitions lost" if lost else "partitions revoked", partitions=_names(tps))
        self._deferred_commits = []
        try:
            self._run_callback(self._on_revoked, tps)
        finally:
            futures, self._deferred_commits = self._deferred_commits, []
        if lost and futures:
            # The group already gave these partitions away: the commit can only be refused.
            log.warning("offsets of lost partitions not committed", partitions=_names(tps))
            return []
        return futures


class _Listener(AsyncConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, source: KafkaTurnSource) -> None:
        self._source = source

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self._await_commits(self._source._revoked(revoked, lost=False))

    async def on_partitions_lost(self, lost: Any) -> None:
        self._source._revoked(lost, lost=True)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self._source._assigned(assigned)

    async def _await_commits(self, futures: list[Any]) -> None:
        source = self._source
        limit = source._close_timeout_s if source._closed else source._commit_timeout_s
        deadline = time.monotonic() + limit
        for future in futures:
            try:
                await wait_within(source._consumer, future, max(0.0, deadline - time.monotonic()))
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
