"""Fixtures shared by the consumer tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from consumers.kafka_source import KafkaTurnSource


@pytest.fixture
def sources() -> Iterator[list[KafkaTurnSource]]:
    """Kafka sources a test opens; closed after it, whatever happened."""
    opened: list[KafkaTurnSource] = []
    yield opened
    for source in opened:
        source.close()
