"""Noticing a consumer group that does not form, so the member can rejoin it.

A group that has not formed for longer than any rebalance the broker should take is stuck
whatever the cause, and the member leaves it and joins again as a dynamic member
(``consumers/kafka_source.py``). How long that is depends on the broker
(``consumers/broker_quirks.py``): on Kafka the longest rebalance it allows; with Tansu's
quirks on, three session timeouts, because Tansu 0.6 can wedge a group for good (a static
member restarted within the broker's 3 s hold makes Tansu expire the old session, mint a new
member id and keep the expired one as the group's leader; every SyncGroup is then answered
"rebalance in progress"). Pure; the clock is injected.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable, Set
from typing import Protocol, runtime_checkable

from monitor.runtime.clock import Clock

# After each rejoin that did not help, the bound doubles (up to this factor) and gets a random
# extra of up to half of itself: members of one group that rejoin on the same rhythm interrupt
# each other's join rounds for ever (seen on Tansu with two members rejoining every ~32 s).
MAX_BACKOFF = 8


class GroupFormation:
    """Formed means stable for ``settle_s`` at a stretch: a group that keeps rebalancing
    (Tansu can also forget a static member's id a second after its SyncGroup, so the member
    rejoins every few seconds) is no more formed than one whose SyncGroup keeps failing."""

    def __init__(
        self,
        clock: Clock,
        bound_s: float,
        settle_s: float,
        rng: random.Random | None = None,
    ) -> None:
        if bound_s <= 0 or settle_s < 0:
            raise ValueError(f"need bound_s > 0 and settle_s >= 0, got {bound_s}, {settle_s}")
        self._clock = clock
        self._base = bound_s
        self._bound = bound_s
        self._backoff = 1
        self._rng = rng or random.Random()  # noqa: S311 (jitter, not a secret)
        self._settle = settle_s
        self._since: float | None = None  # not settled since
        self._formed_at: float | None = None  # formed (not yet settled) since

    @property
    def bound_s(self) -> float:
        return self._bound

    def observe(self, formed: bool) -> bool:
        """Record whether the member is in a formed group now; True once it has not been
        settled in one for longer than the bound (then the count starts again, for the
        rejoin's own rounds). Never while the group is formed: one that has just formed gets
        its chance to settle (a rejoin then would only start another round)."""
        now = self._clock.monotonic()
        if formed:
            if self._formed_at is None:
                self._formed_at = now
            if now - self._formed_at >= self._settle:
                self._since = None
                self._backoff, self._bound = 1, self._base  # settled: the next stall is new
                return False
        else:
            self._formed_at = None
        if self._since is None:
            self._since = now
            return False
        if now - self._since > self._bound and not formed:
            self._since, self._formed_at = now, None
            self._backoff = min(self._backoff * 2, MAX_BACKOFF)
            self._bound = self._base * self._backoff * (1 + self._rng.uniform(0, 0.5))
            return True
        return False


class Rejoin(enum.Enum):
    DYNAMIC = "dynamic"  # as a fresh dynamic member
    TAKE_OVER = "take_over"  # under the departed leader's member id
    WAIT = "wait"  # not now: another member is to take the departed leader's place


class LeaderTakeover:
    """How a member rejoins a group that did not form, when the broker keeps naming as its
    leader a member the group no longer has (Tansu 0.6; consumers/_kafka_group.py). A Tansu
    quirk: on Kafka the leader is always a member, and a JoinGroup under another member's id
    is refused (UNKNOWN_MEMBER_ID), so with the quirks off this is never consulted.

    Only a JoinGroup under the departed leader's id can form such a group, and only one member
    may send it: two processes sharing a member id would both be given its partitions. The
    member whose id sorts first takes the leader's place; the others keep their ids (so the
    choice does not move) and wait one bound for it. If the group still has not formed after
    that, the chosen member may be a dead one the broker has not expired yet (static members'
    requests do not make Tansu expire anyone): they rejoin as fresh dynamic members, whose
    requests do, and the next choice is among the living.
    """

    def __init__(self) -> None:
        self._waited = False

    def decide(self, own_id: str, leader: str | None, members: Set[str]) -> Rejoin:
        """``leader``: the departed leader's id, None when the leader is a member (or that
        could not be told); ``members``: the member ids the coordinator lists."""
        if leader is None or leader in members or own_id not in members:
            self._waited = False
            return Rejoin.DYNAMIC
        if own_id == min(members):
            self._waited = False
            return Rejoin.TAKE_OVER
        if not self._waited:
            self._waited = True
            return Rejoin.WAIT
        self._waited = False
        return Rejoin.DYNAMIC


RejoinListener = Callable[[], None]


@runtime_checkable
class RejoinsStuckGroup(Protocol):
    """A source that leaves and rejoins a consumer group that does not form (Kafka)."""

    def set_rejoin_listener(self, listener: RejoinListener) -> None:
        """``listener`` is called (on the polling thread) at every such rejoin."""
        ...
