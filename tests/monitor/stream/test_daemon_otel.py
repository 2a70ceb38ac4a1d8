"""End to end: OpenTelemetry GenAI traces from a real instrumented RAG program, read from the
embedded broker exactly as the Collector's Kafka exporter writes them, judged once each, the
verdicts written back to a real OTLP/HTTP receiver on the evaluated span.

The RAG program (``tests/consumers/otel/rag_app.py``) runs with the official GenAI
instrumentation (content capture on, and once off) and with OpenInference, against a fake
OpenAI-compatible model server; its spans go through the real SDK and the real OTLP encoder,
each trace split across two messages keyed by its trace id. A malformed record and personal
data ride along. What each kind of input becomes:

- an answered request: one turn on the chat/LLM span, its trace and span ids stored, judged
  once, its gen_ai.evaluation.result records at the receiver;
- a trace recorded with content capture off: skipped as ``content_not_captured``, counted,
  nothing judged;
- an unreadable record: dead-lettered as ``otlp_unreadable``;
- personal data: never at the judge, in a table, on the dead-letter topic or in a record.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import sqlalchemy as sa

from consumers.dlq import KafkaDeadLetterQueue
from consumers.kafka_source import KafkaTurnSource
from consumers.tansu import EmbeddedBroker, create_topics
from monitor.config.kafka import KafkaConfig, TopicConfig
from monitor.otel_export.records import TURN_EVALUATION
from monitor.schema.turn import METRICS
from monitor.storage.store import Store
from tests.fake_judge_server import FakeJudgeServer, content
from tests.fixtures.broker import DLQ_SUFFIX, produce
from tests.fixtures.judge_server import fake_judge_config
from tests.otlp_receiver import otlp_receiver
from tests.support.daemon import kafka_settings, rows_per_event, running
from tests.support.kafka import committed_offset, read_topic
from tests.support.rag_traces import ANSWER, EMAIL, QUESTIONS, rag_traces
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

OI_QUESTION = {
    "conversation": "sess-printer",
    "subject": "Printer jams",
    "query": "My printer jams on every page",
    "docs": [{"id": "doc-a", "score": 0.7, "content": "Clear the paper path and use 80 gsm."}],
}
OFF_QUESTION = {
    "conversation": "conv-off",
    "subject": "Billing",
    "query": "Why was I charged twice?",
    "docs": [{"id": "kb-9", "score": 0.5, "content": "Duplicate charges reverse in 3 days."}],
}


def _every_row(url: str) -> str:
    engine = sa.create_engine(url)
    try:
        meta = sa.MetaData()
        meta.reflect(engine)
        with engine.connect() as conn:
            return "\n".join(
                repr(tuple(row))
                for table in meta.sorted_tables
                for row in conn.execute(table.select())
            )
    finally:
        engine.dispose()


@pytest.mark.parametrize("encoding", ["otlp_proto", "otlp_json"])
def test_instrumented_rag_traces_are_judged_once_and_written_back(
    tansu_broker: EmbeddedBroker, tmp_path: Path, encoding: str
) -> None:
    bootstrap = tansu_broker.bootstrap
    topic = f"otlp_spans.{encoding}.{os.getpid()}"
    create_topics(bootstrap, [topic], dlq_suffix=DLQ_SUFFIX)
    with FakeJudgeServer() as model:
        model.responder = lambda request: content(ANSWER)
        messages = [
            *rag_traces(tmp_path, "genai", model.base_url, encoding, QUESTIONS, "span_only"),
            *rag_traces(tmp_path, "openinference", model.base_url, encoding, [OI_QUESTION], None),
            *rag_traces(tmp_path, "genai", model.base_url, encoding, [OFF_QUESTION], None),
        ]
    assert len(messages) == 8  # four traces, each split across two messages
    for key, value in messages:
        produce(bootstrap, topic, [value], key=key)
    poison = f"not an OTLP batch: reply to {EMAIL}".encode()
    produce(bootstrap, topic, [poison])
    total = len(messages) + 1

    db_url = f"sqlite:///{tmp_path / 'otel.db'}"
    store = Store(db_url)
    store.migrate()
    with FakeJudgeServer() as judge, otlp_receiver() as receiver:
        settings = kafka_settings(
            bootstrap,
            topic,
            db_url,
            judges={"remote": fake_judge_config(judge)},
            judge="remote",
            sampling={"default_rate": 1.0},
            assembly={"idle_seconds": 60, "case_attributes": {"subject": ["support.case.subject"]}},
            otel_export={"endpoint": receiver.url, "schedule_delay_ms": 50},
        )
        kafka = KafkaConfig.model_validate(
            {
                **settings.kafka.model_dump(),
                "topics": [TopicConfig(name=topic, format=encoding)],  # type: ignore[arg-type]
            }
        )
        settings = settings.model_copy(update={"kafka": kafka})
        with running(settings, KafkaTurnSource(kafka), KafkaDeadLetterQueue(kafka), store) as h:
            wait_for(
                lambda: committed_offset(bootstrap, kafka.group_id, topic) == total,
                "every message finished and committed",
            )
            skipped = h.sample(
                "casewatch_turns_skipped_total",
                {"assistant": "support-bot", "reason": "content_not_captured"},
            )
            dead = h.sample("casewatch_dead_letter_total", {"reason": "otlp_unreadable"})
            records = receiver.wait_for(3 * (len(METRICS) + 1))
        bodies = [b.decode("utf-8") for b in judge.request_bodies]

    assert skipped == 1
    assert dead == 1
    # Three answered requests, each judged once (one verdict row per turn).
    judged = rows_per_event(store)
    assert len(judged) == 3 and set(judged.values()) == {1}
    assert len(bodies) == 3
    with store.transaction(write=False) as conn:
        rows = conn.execute(sa.text("SELECT event_id, trace_id, span_id, event FROM turns")).all()
    by_conversation = {}
    for event_id, trace_id, span_id, event in rows:
        doc = json.loads(event) if isinstance(event, str) else event
        assert event_id == f"otel-{trace_id}-{span_id}"
        by_conversation[doc["conversation_id"]] = doc
    assert set(by_conversation) == {"conv-router", "conv-vpn", "sess-printer"}
    router = by_conversation["conv-router"]
    assert router["query"] == "How do I reset my router? Write to <EMAIL_1>."
    assert [c["id"] for c in router["contexts"]] == ["kb-1", "kb-2"]
    assert router["contexts"][0]["text"] == "Router reset: hold the button 10 s."
    assert router["answer"] == ANSWER
    assert router["case"]["subject"] == "Router offline"
    assert router["assistant"]["name"] == "support-bot"
    vpn = by_conversation["conv-vpn"]
    assert [m["content"] for m in vpn["history"]] == ["Hello", "Hi, how can I help?"]
    printer = by_conversation["sess-printer"]
    assert printer["query"] == "My printer jams on every page"
    assert printer["contexts"][0]["id"] == "doc-a"

    # The records: on the evaluated spans, one per metric and one for the turn.
    spans = {(r[1], r[2]) for r in rows}
    assert {(r.trace_id, r.span_id) for r in records} == spans
    assert {r.event_name for r in records} == {"gen_ai.evaluation.result"}
    names = [r.attributes["gen_ai.evaluation.name"] for r in records]
    assert names.count(TURN_EVALUATION) == 3

    # Personal data: not at the judge, in a table, on the dead-letter topic, in a record.
    assert not any(EMAIL in b for b in bodies)
    assert EMAIL not in _every_row(db_url)
    assert not any(EMAIL in json.dumps(r.attributes) for r in records)
    (dead_record,) = read_topic(bootstrap, f"{topic}{DLQ_SUFFIX}", 1)
    assert EMAIL.encode() not in dead_record.value
    assert dict(dead_record.headers)["casewatch-dlq-reason"] == b"otlp_unreadable"
    store.close()
