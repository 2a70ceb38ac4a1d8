"""Fixtures shared by the consumer tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from consumers.kafka_source import KafkaTurnSource
from consumers.tansu import create_topics, delete_topics
from tests.fixtures.broker import ContractBroker


@pytest.fixture
def sources() -> Iterator[list[KafkaTurnSource]]:
    """Kafka sources a test opens; closed after it, whatever happened."""
    opened: list[KafkaTurnSource] = []
    yield opened
    for source in opened:
        source.close()


@pytest.fixture
def two_partitions(kafka_broker: ContractBroker) -> Iterator[str]:
    """A fresh topic of two partitions on the contract suite's broker."""
    topic = f"test.{uuid.uuid4().hex[:12]}"
    create_topics(kafka_broker.bootstrap, [topic], partitions=2)
    yield topic
    delete_topics(kafka_broker.bootstrap, [topic])
