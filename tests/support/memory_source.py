"""An in-memory TurnSource with a Kafka consumer's semantics that a test moves as a group
would: pause and resume, a rewind to the last commit (a consumer that lost its membership), a
partition taken away (``owned``), and, inside the next ``poll`` as kafka-python rebalances,
a partition assigned (``assign_next_poll``: not paused, its records read by that same poll)
or every partition revoked (``revoke_next_poll``, running the rebalance listener).

A revoke is followed by the group's new assignment, as with Kafka's eager protocol: in the
revoke's own poll, or, with ``rebalance_completes`` cleared, in the first poll after it is set
again (a consumer's poll can return before the group's join is over). Until then the revoked
partitions stay in ``assignment()``, as kafka-python keeps them, and deliver nothing; the new
assignment is ``next_owned`` if set, else the same partitions again."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping

from consumers.records import RawMessage, TopicPartition
from consumers.source import PartitionsCallback


class MemorySource:
    def __init__(self, values: dict[TopicPartition, list[bytes]]) -> None:
        self.values = dict(values)
        self.position = dict.fromkeys(values, 0)
        self.owned = set(values)
        self.committed: dict[TopicPartition, int] = {}
        self.revoke_next_poll = threading.Event()
        self.revoking = threading.Event()  # the listener was called
        self.revoked = threading.Event()  # and returned
        self.committed_at_revoke: dict[TopicPartition, int] | None = None
        self.rebalance_completes = threading.Event()
        self.rebalance_completes.set()
        self.next_owned: set[TopicPartition] | None = None
        self.polls = 0
        self._revoked: set[TopicPartition] = set()  # awaiting the new assignment
        self._on_assigned: PartitionsCallback | None = None
        self._paused: set[TopicPartition] = set()
        self._to_assign: dict[TopicPartition, list[bytes] | None] = {}
        self._on_revoked: PartitionsCallback | None = None
        self._lock = threading.Lock()

    def assign_next_poll(self, tp: TopicPartition, values: list[bytes] | None = None) -> None:
        """``values`` read from offset 0, or (None) the partition's own records read again from
        its last commit: one that went to another consumer and comes back."""
        with self._lock:
            self._to_assign[tp] = values

    def rewind(self, tp: TopicPartition) -> None:
        with self._lock:
            self.position[tp] = self.committed.get(tp, 0)

    def poll(
        self, timeout_s: float, max_records: int, *, join_limit_s: float | None = None
    ) -> list[RawMessage]:
        self.polls += 1
        if self.revoke_next_poll.is_set() and self._on_revoked is not None:
            self.revoke_next_poll.clear()
            self.revoking.set()
            with self._lock:
                self._revoked = set(self.owned)
            self._on_revoked(set(self.owned))  # commits what is finished, as a daemon's does
            self.committed_at_revoke = dict(self.committed)
            self.revoked.set()
        if self._revoked and self.rebalance_completes.is_set():
            with self._lock:
                if self.next_owned is not None:
                    self.owned, self.next_owned = set(self.next_owned), None
                self._revoked = set()
                owned = set(self.owned)
            if self._on_assigned is not None:
                self._on_assigned(owned)
        out: list[RawMessage] = []
        with self._lock:
            for tp, values in self._to_assign.items():
                if values is None:
                    self.position[tp] = self.committed.get(tp, 0)
                else:
                    self.values[tp], self.position[tp] = values, 0
                self.owned.add(tp)
            self._to_assign.clear()
            for tp in sorted(self.owned - self._paused - self._revoked):
                while self.position[tp] < len(self.values[tp]) and len(out) < max_records:
                    off = self.position[tp]
                    out.append(RawMessage(tp.topic, tp.partition, off, self.values[tp][off]))
                    self.position[tp] += 1
        if not out:
            time.sleep(min(timeout_s, 0.01))  # as a consumer's poll waits for records
        return out

    def commit(self, offsets: Mapping[TopicPartition, int], timeout_s: float | None = None) -> None:
        with self._lock:
            self.committed.update(offsets)

    def pause(self, tps: Iterable[TopicPartition]) -> None:
        with self._lock:
            self._paused |= set(tps)

    def resume(self, tps: Iterable[TopicPartition]) -> None:
        with self._lock:
            self._paused -= set(tps)

    def paused(self) -> set[TopicPartition]:
        with self._lock:
            return set(self._paused)

    def assignment(self) -> set[TopicPartition]:
        with self._lock:
            return set(self.owned)

    def lag(self) -> dict[TopicPartition, int]:
        with self._lock:
            return {tp: len(v) - self.position[tp] for tp, v in self.values.items()}

    def set_rebalance_listener(
        self, on_assigned: PartitionsCallback, on_revoked: PartitionsCallback
    ) -> None:
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked

    def ping(self) -> bool:
        return True

    def close(self) -> None:
        return None
