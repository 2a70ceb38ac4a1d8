"""Spans from an application with only the OpenTelemetry SDK, to casewatch without a Collector.

Two exporters, written here in a few lines on the SDK's ``SpanExporter`` interface and its
own OTLP encoder (``opentelemetry-sdk`` and ``opentelemetry-exporter-otlp-proto-common``, both
casewatch dependencies; an application adds them to its own):

- ``OtlpFileExporter``: one ``ExportTraceServiceRequest`` per line of a file, OTLP/JSON (what
  ``casewatch run --file FILE --format otlp_json`` reads) or protobuf in base64
  (``--format otlp_proto``);
- ``OtlpKafkaExporter``: one ``ExportTraceServiceRequest`` per Kafka message, binary protobuf
  keyed by trace id, as the Collector's Kafka exporter writes them (a topic with
  ``format: otlp_proto``).

Run from the repository root (docs/otel.md, "Without a Collector")::

    .venv/bin/python examples/otel_without_collector.py --out traces.jsonl
    .venv/bin/python examples/otel_without_collector.py --kafka 127.0.0.1:9092 --topic otlp_spans

It records one answered support question per attribute convention: the GenAI semantic
conventions (``gen_ai.*``; messages and documents as JSON strings, as span attributes hold
them) and OpenInference (``llm.*``, ``retrieval.documents.N.*``). In an application the
instrumentation libraries write these attributes; here they are set by hand, to show each
value's shape.
"""

from __future__ import annotations

import argparse
import base64
import json
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from google.protobuf import json_format
from kafka import KafkaProducer
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

# ---------------------------------------------------------------- the exporters


def otlp_json(spans: Sequence[ReadableSpan]) -> bytes:
    """OTLP/JSON: protobuf's JSON mapping, except that trace and span ids are hex strings."""
    document: dict[str, Any] = json_format.MessageToDict(encode_spans(spans))
    for resource_spans in document.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(document, separators=(",", ":")).encode()


class OtlpFileExporter(SpanExporter):
    """Each batch the SDK exports becomes one line: OTLP/JSON, or protobuf in base64."""

    def __init__(self, path: Path, encoding: str = "otlp_json") -> None:
        self._encoding = encoding
        self._file: IO[bytes] = path.open("ab")

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._encoding == "otlp_json":
            line = otlp_json(spans)
        else:
            line = base64.b64encode(encode_spans(spans).SerializeToString())
        self._file.write(line + b"\n")
        self._file.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._file.close()


class OtlpKafkaExporter(SpanExporter):
    """Each trace of a batch becomes one Kafka message (protobuf), keyed by its trace id so
    that every span of a trace lands in one partition."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self._topic = topic
        self._producer = KafkaProducer(bootstrap_servers=[bootstrap], acks="all")

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        by_trace: dict[int, list[ReadableSpan]] = {}
        for span in spans:
            if span.context is not None:
                by_trace.setdefault(span.context.trace_id, []).append(span)
        for trace_id, trace in by_trace.items():
            value = encode_spans(trace).SerializeToString()
            self._producer.send(self._topic, value=value, key=f"{trace_id:032x}".encode())
        self._producer.flush(timeout=30)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._producer.close(timeout=10)


# ---------------------------------------------------------------- one turn per convention

QUESTION = "My nightly backup job fails with error E42 since Tuesday. How do I fix it?"
DOCUMENTS = [
    {"id": "kb-1042#1", "score": 0.91,
     "content": "Error E42 means the backup target ran out of space. Fixed in version 4.2."},
    {"id": "kb-1042#2", "score": 0.77,
     "content": "To resolve E42, prune old snapshots with `acme-backup prune --keep 7`."},
]  # fmt: skip
ANSWER = (
    "Error E42 means the backup target is full. Prune old snapshots with "
    "`acme-backup prune --keep 7`, then rerun the job; version 4.2 fixes the cause."
)
CASE = {"support.case.subject": "Nightly backup fails with E42"}


def genai_turn(provider: TracerProvider) -> None:
    """GenAI semantic conventions: an agent span, its retrieval span, its chat span."""
    tracer = provider.get_tracer("support-bot")
    with tracer.start_as_current_span("invoke_agent support-bot") as agent:
        agent.set_attributes({"gen_ai.operation.name": "invoke_agent", **CASE})
        agent.set_attribute("gen_ai.conversation.id", "conv-genai-1")
        with tracer.start_as_current_span("retrieval kb") as retrieval:
            retrieval.set_attribute("gen_ai.operation.name", "retrieval")
            retrieval.set_attribute("gen_ai.retrieval.query.text", QUESTION)
            retrieval.set_attribute("gen_ai.retrieval.documents", json.dumps(DOCUMENTS))
        with tracer.start_as_current_span("chat gpt-4o-mini") as chat:
            chat.set_attribute("gen_ai.operation.name", "chat")
            chat.set_attribute("gen_ai.request.model", "gpt-4o-mini")
            chat.set_attribute("gen_ai.response.model", "gpt-4o-mini-2024-07-18")
            messages = [
                {"role": "system", "parts": [{"type": "text", "content": "You are Acme support."}]},
                {"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
            ]
            chat.set_attribute("gen_ai.input.messages", json.dumps(messages))
            answer = [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}],
                       "finish_reason": "stop"}]  # fmt: skip
            chat.set_attribute("gen_ai.output.messages", json.dumps(answer))


def openinference_turn(provider: TracerProvider) -> None:
    """OpenInference: a CHAIN span, its RETRIEVER span, its LLM span (flattened lists)."""
    tracer = provider.get_tracer("support-bot")
    with tracer.start_as_current_span("support-chain") as chain:
        chain.set_attributes({"openinference.span.kind": "CHAIN", **CASE})
        chain.set_attribute("session.id", "conv-openinference-1")
        with tracer.start_as_current_span("retrieve") as retriever:
            retriever.set_attribute("openinference.span.kind", "RETRIEVER")
            retriever.set_attribute("input.value", QUESTION)
            for i, doc in enumerate(DOCUMENTS):
                retriever.set_attribute(f"retrieval.documents.{i}.document.id", doc["id"])
                retriever.set_attribute(f"retrieval.documents.{i}.document.content", doc["content"])
                retriever.set_attribute(f"retrieval.documents.{i}.document.score", doc["score"])
        with tracer.start_as_current_span("ChatCompletion") as llm:
            llm.set_attribute("openinference.span.kind", "LLM")
            llm.set_attribute("llm.model_name", "gpt-4o-mini")
            llm.set_attribute("llm.input_messages.0.message.role", "system")
            llm.set_attribute("llm.input_messages.0.message.content", "You are Acme support.")
            llm.set_attribute("llm.input_messages.1.message.role", "user")
            llm.set_attribute("llm.input_messages.1.message.content", QUESTION)
            llm.set_attribute("llm.output_messages.0.message.role", "assistant")
            llm.set_attribute("llm.output_messages.0.message.content", ANSWER)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", type=Path, help="append the spans to this file")
    where.add_argument("--kafka", metavar="HOST:PORT", help="send the spans to this broker")
    parser.add_argument(
        "--encoding",
        choices=["otlp_json", "otlp_proto"],
        default="otlp_json",
        help="with --out: OTLP/JSON lines, or protobuf in base64 a line",
    )
    parser.add_argument("--topic", default="otlp_spans", help="with --kafka: the topic")
    args = parser.parse_args(argv)
    exporter: SpanExporter
    if args.out is not None:
        exporter = OtlpFileExporter(args.out, args.encoding)
    else:
        exporter = OtlpKafkaExporter(args.kafka, args.topic)
    # service.name and service.version name the assistant casewatch reports on.
    resource = Resource.create({"service.name": "acme-support", "service.version": "2026.12"})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    genai_turn(provider)
    openinference_turn(provider)
    provider.shutdown()  # flushes the batch processor, then shuts the exporter down


if __name__ == "__main__":
    main()
