"""Fixtures shared by the step tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from consumers.dlq import FileDeadLetterSink, KafkaDeadLetterQueue
from consumers.records import RawMessage
from consumers.tansu import EmbeddedBroker, create_topics
from tests.fixtures.broker import DLQ_SUFFIX
from tests.monitor.stream.steps.helpers import OUTAGE_TOPIC, CountingSink
from tests.support.kafka import source_config
from tests.support.waiting import DEADLINE_S


@pytest.fixture
def sink(tmp_path: Path) -> Iterator[FileDeadLetterSink]:
    """A real dead-letter sink (a file), closed after the test."""
    dlq = FileDeadLetterSink(tmp_path / "dlq.jsonl")
    yield dlq
    dlq.close()


@pytest.fixture
def gone_broker_sink(own_broker: EmbeddedBroker) -> Iterator[CountingSink]:
    """A Kafka dead-letter queue whose broker stopped after it learned the topic (so ``send``
    has nothing to ask the cluster first): every write from then on fails after the send
    limit. Records sent through it should come from ``OUTAGE_TOPIC``."""
    create_topics(own_broker.bootstrap, [OUTAGE_TOPIC], dlq_suffix=DLQ_SUFFIX)
    dlq = KafkaDeadLetterQueue(
        source_config(own_broker, OUTAGE_TOPIC), send_timeout_s=1.0, close_timeout_s=1.0
    )
    sink = CountingSink(dlq)
    try:
        sink.send(RawMessage(OUTAGE_TOPIC, 0, 0, b"{not json"), "not_json", "before the outage")
        sink.flush(DEADLINE_S)
        sink.deliveries.clear()
        sink.flushes = 0
        own_broker.stop()
        yield sink
    finally:
        sink.close()
