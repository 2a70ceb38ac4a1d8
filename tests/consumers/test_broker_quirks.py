"""Which broker this is, and what that switches (consumers/broker_quirks.py).

The pure decisions here; that ``auto`` recognises the embedded brokers as they answer is
checked against them (``test_auto_recognises_tansu_and_nothing_else``), and that with the
quirks off kafka-python runs unpatched by them (``test_only_tansus_quirks_...``).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from consumers._kafka import kafka
from consumers._kafka_group import joined_leader
from consumers.broker_quirks import (
    is_tansu,
    kafka_stuck_bound_s,
    tansu_quirks,
    tansu_stuck_bound_s,
)
from consumers.group_rejoin import StuckGroup
from consumers.kafka_source import KafkaTurnSource
from consumers.tansu import create_topics, delete_topics
from monitor.config.kafka import KafkaConfig
from tests.fixtures.broker import ContractBroker
from tests.support.kafka import source_config
from tests.support.waiting import wait_for


def test_tansu_is_recognised_by_its_cluster_id_and_nothing_else_is() -> None:
    assert is_tansu("tansu_cluster")
    # A Kafka (KRaft) cluster id, none reported, an empty one.
    for other in ("MkU3OEVBNTctOEUyRi00", None, ""):
        assert not is_tansu(other)


@pytest.mark.parametrize(
    ("setting", "cluster_id", "on"),
    [
        ("auto", "tansu_cluster", True),
        ("auto", "MkU3OEVBNTctOEUyRi00", False),
        ("auto", None, False),  # not known: Kafka's semantics, the safe side
        ("tansu", "MkU3OEVBNTctOEUyRi00", True),  # forced on
        ("none", "tansu_cluster", False),  # forced off
    ],
)
def test_the_setting_decides_and_auto_follows_the_broker(
    setting: Any, cluster_id: str | None, on: bool
) -> None:
    assert tansu_quirks(setting, cluster_id) is on


def test_on_kafka_a_rebalance_kafka_still_allows_is_never_called_stuck() -> None:
    # A deployment with max.poll.interval far above 3 session timeouts: the longest round
    # (JoinGroup up to the rebalance timeout, SyncGroup up to a session) fits in the bound.
    session_ms, max_poll_ms = 10_000, 300_000
    bound = kafka_stuck_bound_s(session_ms, max_poll_ms)
    assert bound > (max_poll_ms + session_ms) / 1000
    assert tansu_stuck_bound_s(session_ms) == 30.0  # what Tansu's quirks use: 3 sessions


def test_the_stuck_group_bound_follows_the_quirks() -> None:
    config = KafkaConfig(session_timeout_ms=10_000, max_poll_interval_ms=300_000)
    assert StuckGroup(config, 1.0, tansu=False).bound_s == kafka_stuck_bound_s(10_000, 300_000)
    assert StuckGroup(config, 1.0, tansu=True).bound_s == 30.0


def test_the_setting_is_checked() -> None:
    assert KafkaConfig().broker_quirks == "auto"
    with pytest.raises(ValueError, match="broker_quirks"):
        KafkaConfig(broker_quirks="kafka")  # type: ignore[arg-type]


@pytest.mark.integration
def test_auto_recognises_tansu_and_nothing_else(kafka_broker: ContractBroker) -> None:
    topic = f"test.quirks.{uuid.uuid4().hex[:8]}"
    create_topics(kafka_broker.bootstrap, [topic])
    config = KafkaConfig(
        bootstrap_servers=[kafka_broker.bootstrap], topics=[topic], group_id=f"g-{topic}"
    )
    source = KafkaTurnSource(config)
    try:
        assert source.tansu_quirks is (kafka_broker.name == "tansu")
    finally:
        source.close()
        delete_topics(kafka_broker.bootstrap, [topic])


@pytest.mark.integration
@pytest.mark.parametrize("quirks", ["none", "tansu"])
def test_only_tansus_quirks_change_how_kafka_python_handles_a_join(
    kafka_broker: ContractBroker,
    contract_topic: str,
    sources: list[KafkaTurnSource],
    quirks: Any,
) -> None:
    """The JoinGroup leader is remembered (a patch of kafka-python) only for a consumer with
    Tansu's quirks on: with them off the library's own join handling runs, on any broker."""
    source = KafkaTurnSource(source_config(kafka_broker, contract_topic, broker_quirks=quirks))
    sources.append(source)
    wait_for(lambda: bool(source.poll(0.2, 10) or source.assignment()), what="the join")
    consumer = source._consumer
    base = kafka.coordinator.base.BaseCoordinator
    assert not hasattr(base._process_join_group_response, "remembers_leader")
    if quirks == "tansu":
        assert joined_leader(consumer) == source.member_id  # the only member leads
    else:
        assert "_process_join_group_response" not in vars(consumer._coordinator)
        assert joined_leader(consumer) is None
