"""Span builders for the OpenTelemetry intake tests: the attribute shapes the instrumentations
write (checked against real spans in test_instrumented_rag.py)."""

from __future__ import annotations

import json
from typing import Any

from consumers.otel.otlp import Span

TRACE = "0af7651916cd43dd8448eb211c80319c"
RESOURCE = {"service.name": "support-bot", "service.version": "2.3.0"}


def span(
    span_id: str,
    parent: str | None,
    start: int,
    end: int,
    attributes: dict[str, Any],
    *,
    trace_id: str = TRACE,
    name: str = "span",
    resource: dict[str, Any] | None = None,
) -> Span:
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        start_ns=start,
        end_ns=end,
        attributes=attributes,
        resource=RESOURCE if resource is None else resource,
    )


def genai_trace(
    *,
    query: str = "How do I reset my router?",
    answer: str = "Hold the reset button for 10 seconds.",
    documents: list[dict[str, Any]] | None = None,
    capture: bool = True,
    trace_id: str = TRACE,
) -> list[Span]:
    """An agent span (with the conversation id), a retrieval span and a chat span, as the
    official instrumentation and a manual retrieval span write them."""
    docs = (
        documents
        if documents is not None
        else [
            {"id": "kb-1", "score": 0.9, "content": "Router reset: hold the button 10 s."},
            {"id": "kb-2", "score": 0.4, "content": "Warranty terms."},
        ]
    )
    agent = span(
        "a000000000000001",
        None,
        0,
        100,
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.conversation.id": "conv-42",
            "case.subject": "Router offline",
        },
        trace_id=trace_id,
        name="invoke_agent support",
    )
    retrieval_attrs: dict[str, Any] = {
        "gen_ai.operation.name": "retrieval",
        "gen_ai.data_source.id": "kb",
    }
    if capture:
        retrieval_attrs["gen_ai.retrieval.query.text"] = query
        retrieval_attrs["gen_ai.retrieval.documents"] = json.dumps(docs)
    retrieval = span(
        "b000000000000002", "a000000000000001", 10, 20, retrieval_attrs, trace_id=trace_id
    )
    chat_attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-test",
        "gen_ai.response.model": "gpt-test-0611",
    }
    if capture:
        chat_attrs["gen_ai.input.messages"] = json.dumps(
            [
                {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
                {"role": "user", "parts": [{"type": "text", "content": "Hi"}]},
                {"role": "assistant", "parts": [{"type": "text", "content": "Hello!"}]},
                {
                    "role": "user",
                    "parts": [{"type": "text", "content": f"Context: ... Question: {query}"}],
                },
            ]
        )
        chat_attrs["gen_ai.output.messages"] = json.dumps(
            [
                {
                    "role": "assistant",
                    "parts": [{"type": "text", "content": answer}],
                    "finish_reason": "stop",
                }
            ]
        )
    chat = span(
        "c000000000000003", "a000000000000001", 30, 90, chat_attrs, trace_id=trace_id, name="chat"
    )
    return [retrieval, chat, agent]


def openinference_trace(*, hidden: bool = False) -> list[Span]:
    """A CHAIN root, a RETRIEVER span and an LLM span as OpenInference writes them."""
    content = "__REDACTED__" if hidden else None
    chain = span(
        "d000000000000001",
        None,
        0,
        100,
        {"openinference.span.kind": "CHAIN", "session.id": "sess-7"},
    )
    retriever = span(
        "d000000000000002",
        "d000000000000001",
        5,
        15,
        {
            "openinference.span.kind": "RETRIEVER",
            "input.value": "printer jams",
            "retrieval.documents.0.document.id": "doc-a",
            "retrieval.documents.0.document.content": "Clear the paper path.",
            "retrieval.documents.0.document.score": 0.8,
            "retrieval.documents.1.document.id": "doc-b",
            "retrieval.documents.1.document.content": "Use 80 gsm paper.",
            "retrieval.documents.1.document.score": 0.5,
        },
    )
    llm = span(
        "d000000000000003",
        "d000000000000001",
        20,
        80,
        {
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-oi",
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": content or "You help.",
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.content": content or "My printer jams, help",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": content or "Open the tray and clear it.",
        },
    )
    return [chain, retriever, llm]
