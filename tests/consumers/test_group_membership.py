"""Static and dynamic group membership against the embedded broker (Tansu 0.6).

What Tansu does with ``group_instance_id`` (checked here): it keeps a static member's identity.
A static member that closes stays in the group, and when it rejoins under the same name it gets
the same member id back with its partitions, without a new member having to wait for the old
incarnation's session to expire. A dynamic member leaves the group on a clean close (the
daemon's SIGTERM path ends in ``KafkaTurnSource.close``), so the group is empty at once.
"""

from __future__ import annotations

import uuid

import pytest

from consumers._kafka_group import group_member_ids
from consumers.kafka_source import KafkaTurnSource
from consumers.records import TopicPartition
from consumers.tansu import EmbeddedBroker, create_topics
from tests.consumers.group_member import member_config
from tests.monitor.stream.test_daemon import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def two_partitions(tansu_broker: EmbeddedBroker) -> str:
    topic = f"test.members.{uuid.uuid4().hex[:8]}"
    create_topics(tansu_broker.bootstrap, [topic], partitions=2)
    return topic


def _joined(source: KafkaTurnSource, topic: str) -> None:
    every = {TopicPartition(topic, p) for p in (0, 1)}

    def assigned() -> bool:
        source.poll(0.1, 10)
        return source.assignment() == every

    wait_for(assigned, timeout=60, what="both partitions assigned")


def _members(bootstrap: str, group: str) -> list[str]:
    """The member ids the broker lists for ``group``."""
    members = group_member_ids(member_config(bootstrap, "unused", group), timeout_s=10.0)
    assert members is not None, "DescribeGroups failed"
    return sorted(members)


def test_a_dynamic_member_leaves_the_group_when_closed(
    tansu_broker: EmbeddedBroker, two_partitions: str, sources: list[KafkaTurnSource]
) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    source = KafkaTurnSource(member_config(tansu_broker.bootstrap, two_partitions, group))
    sources.append(source)
    _joined(source, two_partitions)
    assert _members(tansu_broker.bootstrap, group) == [source.member_id]
    source.close()
    # Gone now, not after its session timeout: the next member need not wait for it.
    assert _members(tansu_broker.bootstrap, group) == []


def test_a_static_member_stays_when_closed_and_rejoins_as_itself(
    tansu_broker: EmbeddedBroker, two_partitions: str, sources: list[KafkaTurnSource]
) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    cfg = member_config(
        tansu_broker.bootstrap, two_partitions, group, group_instance_id="casewatch-0"
    )
    first = KafkaTurnSource(cfg)
    sources.append(first)
    _joined(first, two_partitions)
    member = first.member_id
    assert member.startswith("casewatch-0")
    first.close()
    assert _members(tansu_broker.bootstrap, group) == [member]  # no LeaveGroup: still there
    second = KafkaTurnSource(cfg)  # the restarted pod, same name
    sources.append(second)
    _joined(second, two_partitions)
    assert second.member_id == member
    assert _members(tansu_broker.bootstrap, group) == [member]
