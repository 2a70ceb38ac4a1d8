"""KafkaTurnSource.start_join: the group join runs on a thread while the daemon starts.

Part of the contract suite (every broker of ``kafka_broker``). What matters: the records come
through as without the early join; the listener set after the join ended still hears of the
partitions; every other call waits for the join instead of using the consumer concurrently;
close() during the join returns.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from consumers.kafka_source import KafkaTurnSource
from consumers.records import TopicPartition
from tests.fixtures.broker import ContractBroker, produce
from tests.support.kafka import poll_until, source_config
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def _joined(source: KafkaTurnSource) -> bool:
    # The join thread has ended its round (read-only peek for the test): ``joining`` is cleared
    # last thing on it.
    return not source._early.joining


def test_an_early_join_assigns_and_the_records_follow(
    kafka_broker: ContractBroker, contract_topic: str, sources: list[KafkaTurnSource]
) -> None:
    produce(kafka_broker.bootstrap, contract_topic, [b"v%d" % i for i in range(5)])
    source = KafkaTurnSource(source_config(kafka_broker, contract_topic))
    sources.append(source)
    source.start_join()
    wait_for(lambda: _joined(source), timeout=120, what="the early join to end")
    tp = TopicPartition(contract_topic, 0)
    # The listener comes after the join (as the daemon's does when the join is quick).
    assigned: list[set[TopicPartition]] = []
    source.set_rebalance_listener(lambda tps: assigned.append(set(tps)), lambda tps: None)
    assert source.assignment() == {tp}
    assert [m.value for m in poll_until(source, 5)] == [b"v%d" % i for i in range(5)]
    assert assigned == [{tp}]  # told once, on the caller's thread


def test_calls_during_an_early_join_wait_for_it(
    kafka_broker: ContractBroker, contract_topic: str, sources: list[KafkaTurnSource]
) -> None:
    source = KafkaTurnSource(source_config(kafka_broker, contract_topic))
    sources.append(source)
    source.start_join()
    seen: dict[str, Any] = {}

    def ask() -> None:
        seen["assignment"] = source.assignment()
        seen["joined"] = _joined(source)

    asker = threading.Thread(target=ask)
    asker.start()
    asker.join(60)
    # The answer came only after the join: the partition is already there.
    assert seen == {"assignment": {TopicPartition(contract_topic, 0)}, "joined": True}


def test_close_during_an_early_join_returns(
    kafka_broker: ContractBroker, contract_topic: str
) -> None:
    source = KafkaTurnSource(source_config(kafka_broker, contract_topic))
    source.start_join()
    closer = threading.Thread(target=source.close)
    closer.start()
    closer.join(90)
    assert not closer.is_alive()
    assert _joined(source)
