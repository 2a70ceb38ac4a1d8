"""When and how a consumer stuck in a group that does not form rejoins it.

``StuckGroup.check`` runs after each poll: it feeds ``GroupFormation`` and, once the group has
not formed for the bound, decides how to rejoin and logs the choice. The source does the
rejoin itself (``KafkaTurnSource._rejoin``): it owns the consumer being replaced.

With Tansu's quirks off (``consumers/broker_quirks.py``) the bound is the longest rebalance
Kafka allows and the rejoin is always a plain one: a fresh dynamic member, the old one leaving
the group. With them on, the bound is three session timeouts, the coordinator is asked for the
members (one DescribeGroups per bound, none while the group is healthy; each consumer
remembers the leader its JoinGroup named, ``StuckGroup.watch``), ``LeaderTakeover``
may choose to rejoin under a departed leader's id, and a member leading the round it gives up
stops without leaving (``forget_membership``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import structlog

from consumers._kafka_group import (
    group_formed,
    group_member_ids,
    joined_leader,
    remember_join_leader,
)
from consumers.broker_quirks import kafka_stuck_bound_s, tansu_stuck_bound_s
from consumers.group_health import GroupFormation, LeaderTakeover, Rejoin
from monitor.config.kafka import KafkaConfig
from monitor.runtime.clock import SystemClock

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class RejoinPlan:
    how: Rejoin  # DYNAMIC or TAKE_OVER
    own_id: str  # the member id the consumer has now ('' if none)
    leader: str | None  # the departed leader's id, to take over; None for DYNAMIC
    # False: stop the old member without a LeaveGroup (Tansu: it leads the round it gives up)
    leave: bool = True


def member_id(consumer: Any) -> str:
    """The consumer's member id in its group ('' before it joined)."""
    return str(consumer.group_metadata().member_id or "")


class StuckGroup:
    def __init__(self, config: KafkaConfig, describe_timeout_s: float, *, tansu: bool) -> None:
        """``tansu``: whether Tansu's quirks are on (``consumers.broker_quirks.tansu_quirks``)."""
        self._config = config
        self._describe_timeout_s = describe_timeout_s
        self.tansu = tansu
        session_s = config.session_timeout_ms / 1000
        bound_s = (
            tansu_stuck_bound_s(config.session_timeout_ms)
            if tansu
            else kafka_stuck_bound_s(config.session_timeout_ms, config.max_poll_interval_ms)
        )
        self._formation = GroupFormation(SystemClock(), bound_s, session_s)
        self._takeover = LeaderTakeover()

    @property
    def bound_s(self) -> float:
        """How long the group may stay unformed now before the member rejoins."""
        return self._formation.bound_s

    def watch(self, consumer: Any) -> None:
        """Get a new consumer ready to be checked, before it joins: with Tansu's quirks on it
        remembers the leader its JoinGroup responses name (``departed_leader``); with them
        off nothing of kafka-python's is changed."""
        if self.tansu:
            remember_join_leader(consumer)

    def check(self, consumer: Any) -> RejoinPlan | None:
        """None while nothing is to be done (the group formed, forming within the bound, or
        another member is to take a departed leader's place); else how to rejoin."""
        formed = group_formed(consumer)
        if formed is None or not self._formation.observe(formed):
            return None
        own = member_id(consumer)
        context = {
            "group": self._config.group_id,
            "group_instance_id": self._config.group_instance_id,
            "next_bound_s": round(self._formation.bound_s, 1),
        }
        if not self.tansu:
            log.warning(
                "the consumer group has not formed within the longest rebalance Kafka allows; "
                "leaving it and rejoining as a dynamic member",
                **context,
            )
            return RejoinPlan(Rejoin.DYNAMIC, own, None)
        # Tansu: a LeaveGroup from the leader of a forming round is what leaves it naming a
        # departed leader (consumers/_kafka_group.py); a member that just stops is expired.
        leave = not (own and joined_leader(consumer) == own)
        leader, members = self.departed_leader(consumer, own)
        how = self._takeover.decide(own, leader, members)
        if how is Rejoin.WAIT:
            log.warning(
                "the consumer group's leader is no longer a member of it; waiting for the "
                "member whose id sorts first to take its place",
                leader=leader,
                chosen=min(members),
                **context,
            )
            return None
        if how is Rejoin.TAKE_OVER:
            log.warning(
                "the consumer group's leader is no longer a member of it; rejoining under the "
                "leader's member id, so that this member leads the group and it forms again",
                leader=leader,
                **context,
            )
            return RejoinPlan(how, own, leader, leave)
        log.warning(
            "the consumer group has not formed; leaving it and rejoining as a dynamic member",
            **context,
        )
        return RejoinPlan(how, own, None, leave)

    def departed_leader(self, consumer: Any, own: str) -> tuple[str | None, set[str]]:
        """The leader the broker last named to ``consumer``, if it is not a member of the
        group (else None), and the group's member ids (empty when they were not asked, or
        could not be)."""
        leader = joined_leader(consumer)
        if leader is None or not own or leader == own:
            return None, set()
        members = group_member_ids(self._config, self._describe_timeout_s)
        if members is None or leader in members:
            return None, members or set()
        return leader, members
