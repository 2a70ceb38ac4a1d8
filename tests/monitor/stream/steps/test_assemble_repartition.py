"""The assemble step re-publishing spans to a real broker that goes away and comes back: the
source message is done only once its parts are acknowledged; a failed send is counted and
tried again, the message held meanwhile."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from consumers.dlq import FileDeadLetterSink
from consumers.otel.assembly import TraceAssembler
from consumers.otel.genai import CaseAttributes
from consumers.records import RawMessage, TopicPartition
from consumers.repartition import TraceRepublisher
from consumers.tansu import EmbeddedBroker, free_port
from monitor.config.kafka import KafkaConfig
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.stream.recorder import StreamRecorder
from monitor.stream.steps.assemble import AssembleStep
from monitor.stream.steps.base import Envelope
from monitor.stream.steps.republishing import REPUBLISH_RETRY_S
from tests.consumers.otel.otlp_messages import request_of
from tests.consumers.otel.spans import genai_trace
from tests.monitor.stream.steps.helpers import Recorder
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

TOPIC = "spans"
INTERNAL = "spans.casewatch-by-trace"


@pytest.fixture
def broker(tansu: None, tmp_path: Path) -> Iterator[tuple[int, list[EmbeddedBroker]]]:
    """A broker on a port of its own (started again on the same port by the test)."""
    port = free_port()
    started = [EmbeddedBroker(port=port, log_path=tmp_path / "tansu-1.log")]
    started[0].start()
    yield port, started
    for b in started:
        b.stop()


def test_a_failed_re_publish_holds_the_message_until_the_broker_acknowledges_it(
    broker: tuple[int, list[EmbeddedBroker]], sink: FileDeadLetterSink, tmp_path: Path
) -> None:
    port, started = broker
    registry = CollectorRegistry()
    clock = ManualClock()
    done = Recorder()
    config = KafkaConfig(bootstrap_servers=[f"127.0.0.1:{port}"], topics=[TOPIC])
    republisher = TraceRepublisher(config, send_timeout_s=1.0, close_timeout_s=1.0)
    step = AssembleStep(
        Recorder(),
        Recorder(),
        done,
        sink,
        StreamRecorder(Metrics(registry)),
        TraceAssembler(idle_seconds=30, max_traces=10, max_spans=100, max_spans_per_trace=10),
        encodings={TOPIC: "otlp_proto", INTERNAL: "otlp_proto"},
        max_bytes=1_000_000,
        case_attributes=CaseAttributes(),
        clock=clock,
        repartition={TOPIC: INTERNAL},
        republisher=republisher,
    )

    def outcome(name: str) -> float:
        labels = {"outcome": name}
        return registry.get_sample_value("casewatch_spans_repartitioned_total", labels) or 0.0

    tp = TopicPartition(TOPIC, 1)
    try:
        started[0].stop()  # the broker goes away before the first part is sent
        value = request_of(genai_trace())
        step.submit(Envelope(tp, 7, RawMessage(TOPIC, 1, 7, value)))
        step.poll()
        assert outcome("failed") >= 1
        assert done.items == []  # held: not committable while its part is not acknowledged

        started.append(EmbeddedBroker(port=port, log_path=tmp_path / "tansu-2.log"))
        started[-1].start()

        def retried() -> bool:
            clock.advance(REPUBLISH_RETRY_S)
            step.poll()
            return bool(done.items)

        wait_for(retried, what="the part re-sent, acknowledged and the message done")
        assert [(m.tp, m.offset) for m in done.items] == [(tp, 7)]
        assert outcome("sent") == 1
    finally:
        step.close()
