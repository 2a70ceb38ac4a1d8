"""Static and dynamic group membership, as Kafka defines it (contract suite: every broker of
``kafka_broker``).

A dynamic member leaves the group on a clean close (the daemon's SIGTERM path ends in
``KafkaTurnSource.close``), so the group is empty at once. A static member
(``group_instance_id``, KIP-345) sends no LeaveGroup: it stays listed until its session times
out, so its restart takes its partitions back without a rebalance. Kafka hands the restarted
instance a new member id and fences the old one: the group lists one member for the name, and
the old instance's requests are refused (FENCED_INSTANCE_ID).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from consumers._kafka_group import group_member_ids
from consumers.kafka_source import KafkaTurnSource
from consumers.records import TopicPartition
from monitor.config.kafka import KafkaConfig
from monitor.errors import BrokerError
from tests.consumers.group_member import member_config
from tests.fixtures.broker import ContractBroker
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def _joined(source: KafkaTurnSource, topic: str) -> None:
    every = {TopicPartition(topic, p) for p in (0, 1)}

    def assigned() -> bool:
        source.poll(0.1, 10)
        return source.assignment() == every

    wait_for(assigned, timeout=120, what="both partitions assigned")


def _members(bootstrap: str, group: str) -> list[str]:
    """The member ids the broker lists for ``group``."""
    members = group_member_ids(member_config(bootstrap, "unused", group), timeout_s=10.0)
    assert members is not None, "DescribeGroups failed"
    return sorted(members)


def _config(bootstrap: str, topic: str, group: str, **kw: Any) -> KafkaConfig:
    return member_config(bootstrap, topic, group, broker_quirks="none", **kw)


def test_a_dynamic_member_leaves_the_group_when_closed(
    kafka_broker: ContractBroker, two_partitions: str, sources: list[KafkaTurnSource]
) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    source = KafkaTurnSource(_config(kafka_broker.bootstrap, two_partitions, group))
    sources.append(source)
    _joined(source, two_partitions)
    assert _members(kafka_broker.bootstrap, group) == [source.member_id]
    source.close()
    # Gone now, not after its session timeout: the next member need not wait for it.
    assert _members(kafka_broker.bootstrap, group) == []


def _restarted(
    bootstrap: str, topic: str, sources: list[KafkaTurnSource]
) -> tuple[str, str, KafkaTurnSource]:
    """A static member joins, closes (as a pod stopping), and its restart joins under the same
    name: the group, the first incarnation's member id, and the restart."""
    group = f"g-{uuid.uuid4().hex[:8]}"
    cfg = _config(bootstrap, topic, group, group_instance_id="casewatch-0")
    first = KafkaTurnSource(cfg)
    sources.append(first)
    _joined(first, topic)
    member = first.member_id
    first.close()
    assert _members(bootstrap, group) == [member]  # no LeaveGroup: still there
    second = KafkaTurnSource(cfg)
    sources.append(second)
    _joined(second, topic)
    return group, member, second


def test_a_static_member_stays_when_closed_and_its_restart_takes_its_place(
    kafka_broker: ContractBroker, two_partitions: str, sources: list[KafkaTurnSource]
) -> None:
    group, _, second = _restarted(kafka_broker.bootstrap, two_partitions, sources)
    # One member for the name, whatever id the broker gave the restart.
    assert _members(kafka_broker.bootstrap, group) == [second.member_id]


@pytest.mark.deviates("tansu", "a static member rejoining gets its old member id back")
def test_a_static_member_rejoining_gets_a_new_member_id(
    kafka_broker: ContractBroker, two_partitions: str, sources: list[KafkaTurnSource]
) -> None:
    _, member, second = _restarted(kafka_broker.bootstrap, two_partitions, sources)
    assert second.member_id not in ("", member)


@pytest.mark.deviates(
    "tansu",
    "the newer instance under a name gets the older one's member id and generation back, so "
    "the older one's commit is accepted until its own heartbeat learns it was fenced",
)
def test_the_old_instance_of_a_static_member_is_fenced(
    kafka_broker: ContractBroker, two_partitions: str, sources: list[KafkaTurnSource]
) -> None:
    """Two processes under one name (a pod restarted while its old incarnation still runs):
    the newer one is the member, and the older one cannot commit over it."""
    group = f"g-{uuid.uuid4().hex[:8]}"
    cfg = _config(kafka_broker.bootstrap, two_partitions, group, group_instance_id="casewatch-0")
    old = KafkaTurnSource(cfg)
    sources.append(old)
    _joined(old, two_partitions)
    new = KafkaTurnSource(cfg)
    sources.append(new)
    _joined(new, two_partitions)
    with pytest.raises(BrokerError):
        old.commit({TopicPartition(two_partitions, 0): 0})
