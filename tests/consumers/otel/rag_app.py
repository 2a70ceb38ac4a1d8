"""A small RAG program instrumented by the real GenAI instrumentations, run as a process.

It answers support questions: a retrieval step (a span the app writes, as retrieval libraries
do) then a chat call through the real ``openai`` client to an OpenAI-compatible model server
(the test's fake one), instrumented by ``opentelemetry-instrumentation-openai-v2`` (family
``genai``) or ``openinference-instrumentation-openai`` (family ``openinference``). The real SDK
records the spans; the real OTLP encoder turns them into ``ExportTraceServiceRequest`` messages
as the Collector's Kafka exporter writes them (one trace split across two messages: the
children, then the root; keyed by the trace id as hex). Each message is printed as a JSON line
``{"key": hex, "value": base64}``.

A process of its own: content capture is read from the environment, and two instrumentations
of one client in one process would both record every call.

    python -m tests.consumers.otel.rag_app --family genai --base-url URL --encoding otlp_proto \
        --questions questions.json
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from collections import defaultdict
from typing import Any

import openai
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.consumers.otel.otlp_messages import encode

SYSTEM = "You are a support assistant. Answer from the documents."


def _instrument(family: str, provider: TracerProvider) -> None:
    if family == "genai":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=provider)
    else:
        from openinference.instrumentation.openai import OpenAIInstrumentor as OIInstrumentor

        OIInstrumentor().instrument(tracer_provider=provider)


def _retrieval(span: Any, family: str, query: str, docs: list[dict[str, Any]]) -> None:
    if family == "genai":
        span.set_attribute("gen_ai.operation.name", "retrieval")
        span.set_attribute("gen_ai.data_source.id", "kb")
        span.set_attribute("gen_ai.retrieval.query.text", query)
        span.set_attribute("gen_ai.retrieval.documents", json.dumps(docs))
    else:
        span.set_attribute("openinference.span.kind", "RETRIEVER")
        span.set_attribute("input.value", query)
        for i, doc in enumerate(docs):
            span.set_attribute(f"retrieval.documents.{i}.document.id", doc["id"])
            span.set_attribute(f"retrieval.documents.{i}.document.content", doc["content"])
            span.set_attribute(f"retrieval.documents.{i}.document.score", doc["score"])


def answer(
    client: openai.OpenAI, provider: TracerProvider, family: str, question: dict[str, Any]
) -> None:
    tracer = provider.get_tracer("support-rag")
    with tracer.start_as_current_span("invoke_agent support") as agent:
        if family == "genai":
            agent.set_attribute("gen_ai.operation.name", "invoke_agent")
            agent.set_attribute("gen_ai.conversation.id", question["conversation"])
        else:
            agent.set_attribute("openinference.span.kind", "AGENT")
            agent.set_attribute("session.id", question["conversation"])
        agent.set_attribute("support.case.subject", question["subject"])
        with tracer.start_as_current_span("retrieval kb") as retrieval:
            _retrieval(retrieval, family, question["query"], question["docs"])
        context = "\n".join(d["content"] for d in question["docs"])
        client.chat.completions.create(
            model="support-model",
            messages=[
                {"role": "system", "content": SYSTEM},
                *question.get("history", []),
                {"role": "user", "content": f"Documents:\n{context}\n\n{question['query']}"},
            ],
        )


def messages(spans: tuple[ReadableSpan, ...], encoding: str) -> list[dict[str, str]]:
    by_trace: dict[int, list[ReadableSpan]] = defaultdict(list)
    for span in spans:
        assert span.context is not None
        by_trace[span.context.trace_id].append(span)
    out = []
    for trace_id, trace in by_trace.items():
        children = [s for s in trace if s.parent is not None]
        roots = [s for s in trace if s.parent is None]
        for part in (children, roots):  # one trace, two messages: as a batch boundary falls
            out.append(
                {
                    "key": f"{trace_id:032x}",
                    "value": base64.b64encode(encode(part, encoding)).decode(),
                }
            )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--family", choices=["genai", "openinference"], required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--encoding", choices=["otlp_proto", "otlp_json"], required=True)
    parser.add_argument("--questions", required=True, help="JSON file: a list of questions")
    args = parser.parse_args(argv)
    exporter = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "support-bot", "service.version": "1.4.0"})
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _instrument(args.family, provider)
    client = openai.OpenAI(base_url=args.base_url, api_key="test-key")
    with open(args.questions, encoding="utf-8") as fh:
        questions = json.load(fh)
    for question in questions:
        answer(client, provider, args.family, question)
    client.close()
    provider.shutdown()
    for line in messages(exporter.get_finished_spans(), args.encoding):
        sys.stdout.write(json.dumps(line) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
