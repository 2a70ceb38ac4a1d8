"""kafka-python's group coordinator, reached into: joining without fetching, telling whether
the group is formed, and what a member needs to get a wedged group formed again.

The private attributes used here are listed in ``consumers._kafka.PRIVATE_ATTRIBUTES`` with the
others, and degrade the same way (a warning, then the library's own behaviour).

Why a member may have to rejoin under another member's id: Tansu 0.6 can keep, as the leader
of a forming group, a member it has already removed (one its heartbeat check evicted while the
group was formed, or one that left during a rebalance). Only the leader's SyncGroup can form a
group, so every other SyncGroup is answered "rebalance in progress" for ever, new members and
dynamic rejoins included. The broker still accepts a JoinGroup carrying that member id, though,
and makes its sender the leader: one member rejoining under the departed leader's id forms the
group again. ``group_member_ids`` is what tells a departed leader from a slow one; on Kafka the
leader is always a member, so there this never happens. A leader that leaves a forming round
(LeaveGroup) is how the state is reached most directly, so a member that leads the round it
gives up stops without leaving (``forget_membership``), and Tansu expires it, which does clear
the leader.
"""

from __future__ import annotations

from typing import Any

import structlog

from consumers._kafka import _JOIN_RESPONSE, KafkaAdminClient, _fallback, client_options
from monitor.config.kafka import KafkaConfig

__all__ = [
    "finish_pending_join",
    "forget_membership",
    "group_formed",
    "group_member_ids",
    "join_group",
    "joined_leader",
    "remember_join_leader",
    "take_member_id",
]

_log = structlog.get_logger(__name__)


def finish_pending_join(consumer: Any, timeout_ms: int) -> None:
    """Wait, in one call, for a group (re)join that is due, before the consumer polls.

    Works around kafka-python 3.0.12: a JoinGroup/SyncGroup round that completes while no
    ``poll()`` is waiting for it is thrown away and the member joins again. With short poll
    timeouts (and a follower whose SyncGroup waits for the leader's) that repeats forever, so a
    rebalance never finishes. Waiting for the whole round keeps its result. Only done while
    the coordinator is known, so an unreachable broker still returns within the poll timeout.
    """
    coordinator: Any = getattr(consumer, "_coordinator", None)
    for name in ("need_rejoin", "coordinator_unknown"):
        if not hasattr(coordinator, name):
            _fallback("finish_pending_join", f"KafkaConsumer._coordinator.{name}")
            return
    if not coordinator.coordinator_unknown() and coordinator.need_rejoin():
        coordinator.poll(timeout_ms=timeout_ms)


def join_group(consumer: Any, timeout_ms: int) -> bool:
    """Find the coordinator and join the group (JoinGroup, SyncGroup, assignment) in one call,
    without fetching; False when that did not finish within ``timeout_ms`` or is not possible.

    ``KafkaConsumer`` joins only inside ``poll()``, which also fetches and returns records; this
    lets a caller join first (on a thread of its own, while it gets everything else ready) and
    poll later. One call for the whole round, as ``finish_pending_join`` explains.
    """
    coordinator = getattr(consumer, "_coordinator", None)
    if coordinator is None or not hasattr(coordinator, "poll"):
        _fallback("join_group", "KafkaConsumer._coordinator.poll")
        return False
    return bool(coordinator.poll(timeout_ms=timeout_ms))


def group_formed(consumer: Any) -> bool | None:
    """Whether the consumer is a member of a formed group (joined, synced, no rejoin due);
    None when that cannot be told (no coordinator known: a broker outage, not a stuck group)."""
    coordinator: Any = getattr(consumer, "_coordinator", None)
    for name in ("stable", "need_rejoin", "coordinator_unknown"):
        if not hasattr(coordinator, name):
            _fallback("group_formed", f"KafkaConsumer._coordinator.{name}")
            return None
    if coordinator.coordinator_unknown():
        return None
    return bool(coordinator.stable() and not coordinator.need_rejoin())


_LEADER = "_casewatch_join_leader"


def remember_join_leader(consumer: Any) -> bool:
    """Make ``consumer`` keep the leader each of its successful JoinGroup responses names
    (``joined_leader``); False when that cannot be done (the library's own behaviour stays).

    kafka-python 3.0.12 reads ``JoinGroupResponse.leader`` only to decide whether it is the
    leader itself, and keeps nothing of it. Only Tansu's quirks need it (a departed leader
    told from a slow one), so it is patched on the coordinator of a consumer that has them on,
    never on the library's class: with the quirks off kafka-python's own code runs.
    """
    coordinator: Any = getattr(consumer, "_coordinator", None)
    original = getattr(coordinator, "_process_join_group_response", None)
    if original is None:
        _fallback("remember_join_leader", _JOIN_RESPONSE)
        return False
    if getattr(original, "remembers_leader", False):
        return True

    def process(response: Any, send_time: Any) -> Any:
        result = original(response, send_time)  # raises on an error code
        setattr(coordinator, _LEADER, str(response.leader or ""))
        return result

    process.remembers_leader = True  # type: ignore[attr-defined]
    coordinator._process_join_group_response = process
    return True


def joined_leader(consumer: Any) -> str | None:
    """The leader's member id in the consumer's last successful JoinGroup response (None
    before one, without ``remember_join_leader``, or when that cannot be told)."""
    return getattr(getattr(consumer, "_coordinator", None), _LEADER, None) or None


def take_member_id(consumer: Any, member_id: str) -> bool:
    """Make the consumer's next JoinGroup carry ``member_id`` (a dynamic member's id, as
    kafka-python itself records one the broker handed out); False when that cannot be done."""
    coordinator = getattr(consumer, "_coordinator", None)
    if coordinator is None or not hasattr(coordinator, "reset_generation"):
        _fallback("take_member_id", "KafkaConsumer._coordinator.reset_generation")
        return False
    coordinator.reset_generation(member_id=member_id)
    return True


def forget_membership(consumer: Any) -> bool:
    """Make the consumer forget its member id, so that closing it sends no LeaveGroup (the
    member is expired by the broker after its session instead); False when that cannot be
    done."""
    return take_member_id(consumer, "")  # kafka-python's UNKNOWN_MEMBER_ID


def group_member_ids(config: KafkaConfig, timeout_s: float) -> set[str] | None:
    """The member ids the group coordinator lists for ``config.group_id`` (DescribeGroups), or
    None when it could not be asked (unreachable, refused, or an unexpected answer)."""
    timeout_ms = max(1, int(timeout_s * 1000))
    try:
        admin = KafkaAdminClient(
            **client_options(config), bootstrap_timeout_ms=timeout_ms, request_timeout_ms=timeout_ms
        )
        try:
            # kafka-python 3.0.12 cannot parse the authorized-operations bits Tansu returns
            # (ValueError: 15 is not a valid ACLOperation); the member list does not need them,
            # and they were not asked for.
            if hasattr(admin, "_process_acl_operations"):
                admin._process_acl_operations = lambda described: described
            else:
                _fallback("describe_groups_acl", "KafkaAdminClient._process_acl_operations")
            description = admin.describe_groups([config.group_id])[config.group_id]
        finally:
            admin.close()
        return {str(member["member_id"]) for member in description["members"]}
    except Exception as exc:  # best effort: the caller falls back to an ordinary rejoin
        _log.warning("describing the consumer group failed", group=config.group_id, error=str(exc))
        return None
