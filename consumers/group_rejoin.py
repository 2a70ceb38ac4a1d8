"""When and how a consumer stuck in a group that does not form rejoins it (issue 24).

``StuckGroup.check`` runs after each poll: it feeds ``GroupFormation`` and, once the group has
not formed for the bound, asks the coordinator for the members (only then: one DescribeGroups
per bound, none while the group is healthy), lets ``LeaderTakeover`` choose how to rejoin and
logs the choice. The source does the rejoin itself (``KafkaTurnSource._rejoin``): it owns the
consumer being replaced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import structlog

from consumers._kafka_group import group_formed, group_member_ids, joined_leader
from consumers.group_health import SESSION_TIMEOUTS, GroupFormation, LeaderTakeover, Rejoin
from monitor.clock import SystemClock
from monitor.settings import KafkaConfig

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class RejoinPlan:
    how: Rejoin  # DYNAMIC or TAKE_OVER
    own_id: str  # the member id the consumer has now ('' if none)
    leader: str | None  # the departed leader's id, to take over; None for DYNAMIC


def member_id(consumer: Any) -> str:
    """The consumer's member id in its group ('' before it joined)."""
    return str(consumer.group_metadata().member_id or "")


class StuckGroup:
    def __init__(self, config: KafkaConfig, describe_timeout_s: float) -> None:
        self._config = config
        self._describe_timeout_s = describe_timeout_s
        session_s = config.session_timeout_ms / 1000
        self._formation = GroupFormation(SystemClock(), SESSION_TIMEOUTS * session_s, session_s)
        self._takeover = LeaderTakeover()

    def check(self, consumer: Any) -> RejoinPlan | None:
        """None while nothing is to be done (the group formed, forming within the bound, or
        another member is to take a departed leader's place); else how to rejoin."""
        formed = group_formed(consumer)
        if formed is None or not self._formation.observe(formed):
            return None
        own = member_id(consumer)
        leader, members = self.departed_leader(consumer, own)
        how = self._takeover.decide(own, leader, members)
        context = {
            "group": self._config.group_id,
            "group_instance_id": self._config.group_instance_id,
            "next_bound_s": round(self._formation.bound_s, 1),
        }
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
            return RejoinPlan(how, own, leader)
        log.warning(
            "the consumer group has not formed; leaving it and rejoining as a dynamic member",
            **context,
        )
        return RejoinPlan(how, own, None)

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
