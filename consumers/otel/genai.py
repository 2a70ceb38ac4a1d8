"""A complete trace → the turns it answered (pure; no I/O).

Two attribute families are read, whichever the instrumentation wrote: the OpenTelemetry GenAI
semantic conventions (``consumers.otel.semconv``) first, then OpenInference
(``consumers.otel.openinference``). This module is what a turn is made of, whatever the
convention: which spans answer, which retrieval fed them, where the case fields are.

The evaluated span is the inference span that produced the answer, never the root or agent
span: its trace and span ids go with the turn (and make its event id, so a replayed trace is
the same turn). Attributes a turn needs may sit on any span of the trace (the official
instrumentation puts ``gen_ai.conversation.id`` on the agent span): the inference span is read
first, then its ancestors, then every other span, then the resource.

What cannot be judged is a ``Skipped`` with a bounded reason (``SKIP_REASONS``), never silence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from consumers.otel import openinference, semconv
from consumers.otel.attribute_values import Document, Message, as_str
from consumers.otel.otlp import AttrValue, Span
from consumers.otel.semconv import CAPTURE_HINT
from monitor.errors import truncate, validation_error_lines
from monitor.schema.turn import TurnEvent

# Where each convention puts the conversation and the model, its own first.
CONVERSATION_KEYS = (semconv.CONVERSATION_ID, openinference.SESSION_ID)
MODEL_KEYS = (*semconv.MODEL, openinference.MODEL)

# Why a trace (or one of its inference spans) gave no turn; bounded label values.
SKIP_REASONS: tuple[str, ...] = (
    "no_genai_span",  # a whole trace (root and every parent there) with no GenAI span at all
    # GenAI spans (an agent, a retrieval) but no inference span: the model was not called, or
    # its span went where this consumer does not read (a trace split across replicas)
    "no_inference_span",
    "content_not_captured",  # inference span without messages: content capture is off
    "content_hidden",  # OpenInference's __REDACTED__ placeholder instead of content
    "no_answer",  # the inference span has no assistant text (a tool call, an error)
    "no_query",  # neither a retrieval query nor a user message
    "documents_without_text",  # a retrieved document carries only id/score
    "invalid_turn",  # the fields read do not make a valid turn event (named in the detail)
    # The assemble step's, before a trace reaches turns_from_trace: a fragment (no root, or
    # spans whose parents never came), spans that came after their trace was finished, and
    # spans of a finished trace read again (a message re-read, a span re-published).
    *("trace_incomplete", "late_span", "duplicate_span"),
    # A whole-looking trace from messages not keyed by trace id, read by a member that does
    # not read every partition of the topic: spans of it may be on another member.
    "trace_not_keyed",
)

MAX_DETAIL_CHARS = 300


@dataclass(frozen=True)
class CaseAttributes:
    """Which span or resource attributes hold the case fields (first one present wins)."""

    subject: tuple[str, ...] = ()
    description: tuple[str, ...] = ()
    product: tuple[str, ...] = ()
    environment: tuple[str, ...] = ()


@dataclass(frozen=True)
class Skipped:
    reason: str
    detail: str
    trace_id: str
    span_id: str | None


def turns_from_trace(
    spans: Sequence[Span], case_attributes: CaseAttributes = CaseAttributes()
) -> tuple[list[TurnEvent], list[Skipped]]:
    """One turn per answered user request in the trace, and what could not be judged."""
    if not spans:
        return [], []
    trace_id = spans[0].trace_id
    inference = [s for s in spans if _is_inference(s)]
    if not inference:
        genai = [s.name for s in spans if _is_genai(s)]
        if genai:
            detail = (
                f"GenAI spans ({', '.join(sorted(set(genai))[:3])}) but no inference span: the "
                "model was not called, or its span reached a consumer that does not read this "
                "part of the trace"
            )
            return [], [
                Skipped("no_inference_span", truncate(detail, MAX_DETAIL_CHARS), trace_id, None)
            ]
        return [], [Skipped("no_genai_span", "the trace has no GenAI span", trace_id, None)]
    by_id = {s.span_id: s for s in spans}
    turns: list[TurnEvent] = []
    skipped: list[Skipped] = []
    answered: dict[tuple[str, int], TurnEvent] = {}
    for span in sorted(inference, key=lambda s: (s.end_ns, s.span_id)):
        result = _turn(span, spans, by_id, case_attributes)
        if isinstance(result, Skipped):
            skipped.append(result)
            continue
        # An agent may call the model several times for one request (tool calls first): the
        # request is answered by the last call that produced text for the same user message.
        answered[(result.query, result.turn_index)] = result
    turns.extend(answered.values())
    return turns, skipped


def _is_inference(span: Span) -> bool:
    a = span.attributes
    return semconv.is_inference(a) or openinference.is_llm(a)


def _is_genai(span: Span) -> bool:
    a = span.attributes
    return semconv.is_genai(a) or openinference.is_span(a)


def _is_retrieval(span: Span) -> bool:
    a = span.attributes
    return semconv.is_retrieval(a) or openinference.is_retriever(a)


def _turn(
    span: Span,
    spans: Sequence[Span],
    by_id: Mapping[str, Span],
    case_attributes: CaseAttributes,
) -> TurnEvent | Skipped:
    def skip(reason: str, detail: str) -> Skipped:
        return Skipped(reason, detail, span.trace_id, span.span_id)

    inputs = _input_messages(span.attributes)
    outputs = _output_messages(span.attributes)
    texts = [m.text for m in (*inputs, *outputs) if m.text is not None]
    if any(t == openinference.REDACTED for t in texts):
        return skip("content_hidden", openinference.HIDDEN_HINT)
    if not inputs and not outputs:
        return skip("content_not_captured", f"the inference span has no messages; {CAPTURE_HINT}")
    answer = next((m.text for m in reversed(outputs) if m.text), None)
    if answer is None:
        if not texts:
            return skip("content_not_captured", f"the messages carry no text; {CAPTURE_HINT}")
        return skip("no_answer", "the inference span's output has no assistant text")
    users = [i for i, m in enumerate(inputs) if m.role == "user" and m.text]
    last_user = users[-1] if users else None
    retrieval = _retrieval_before(span, spans)
    query = _retrieval_query(retrieval) if retrieval is not None else None
    if not query and last_user is not None:
        query = inputs[last_user].text
    if not query:
        return skip("no_query", "neither a retrieval query nor a user message on the trace")
    documents = _documents(retrieval) if retrieval is not None else []
    missing = sum(1 for d in documents if not d.text)
    if missing:
        return skip(
            "documents_without_text",
            f"{missing} of {len(documents)} retrieved documents have no text (only id/score): "
            "the retrieval instrumentation must record the document content",
        )
    history_end = last_user if last_user is not None else len(inputs)
    history = [
        {"role": m.role, "content": m.text}
        for m in inputs[:history_end]
        if m.text and m.role in ("user", "assistant", "tool")
    ]
    around = _search_order(span, spans, by_id)
    conversation = _first_str(around, CONVERSATION_KEYS) or span.trace_id
    resource = span.resource
    model = _first_str(around, MODEL_KEYS)
    event: dict[str, Any] = {
        "event_id": f"otel-{span.trace_id}-{span.span_id}",
        "conversation_id": conversation,
        "turn_index": sum(1 for i in users if i != last_user),
        "timestamp": datetime.fromtimestamp(span.end_ns / 1e9, tz=UTC),
        "assistant": {
            "name": as_str(resource.get("service.name")) or "unknown_service",
            "version": as_str(resource.get("service.version")) or "",
            "model": model or "",
        },
        "case": {
            "subject": _case_field(around, case_attributes.subject) or "",
            "description": _case_field(around, case_attributes.description) or "",
            "product": _case_field(around, case_attributes.product),
            "environment": _case_field(around, case_attributes.environment),
        },
        "history": history,
        "query": query,
        "contexts": [
            {
                "id": d.id or (f"{retrieval.span_id}:{i}" if retrieval else str(i)),
                "text": d.text,
                "score": d.score,
            }
            for i, d in enumerate(documents)
        ],
        "answer": answer,
        "trace_id": span.trace_id,
        "span_id": span.span_id,
    }
    try:
        return TurnEvent.model_validate(event)
    except ValidationError as exc:
        return skip("invalid_turn", truncate("; ".join(validation_error_lines(exc)), 300))


# ---------------------------------------------------------------- messages


def _input_messages(a: Mapping[str, AttrValue]) -> list[Message]:
    found = semconv.input_messages(a)
    return openinference.input_messages(a) if found is None else found


def _output_messages(a: Mapping[str, AttrValue]) -> list[Message]:
    found = semconv.output_messages(a)
    return openinference.output_messages(a) if found is None else found


# ---------------------------------------------------------------- retrieval


def _retrieval_before(span: Span, spans: Sequence[Span]) -> Span | None:
    """The retrieval span that fed this inference: the last one to end before it started
    (else the last one to end at all)."""
    found = [s for s in spans if _is_retrieval(s)]
    if not found:
        return None
    before = [s for s in found if s.end_ns <= span.start_ns]
    return max(before or found, key=lambda s: (s.end_ns, s.span_id))


def _retrieval_query(span: Span) -> str | None:
    a = span.attributes
    return semconv.retrieval_query(a) or openinference.retrieval_query(a)


def _documents(span: Span) -> list[Document]:
    a = span.attributes
    found = semconv.documents(a)
    return openinference.documents(a) if found is None else found


# ---------------------------------------------------------------- attributes across the trace


def _search_order(span: Span, spans: Sequence[Span], by_id: Mapping[str, Span]) -> list[Span]:
    """The inference span, its ancestors nearest first, then every other span."""
    order = [span]
    seen = {span.span_id}
    parent = span.parent_span_id
    while parent is not None and parent in by_id and parent not in seen:
        order.append(by_id[parent])
        seen.add(parent)
        parent = by_id[parent].parent_span_id
    order.extend(s for s in spans if s.span_id not in seen)
    return order


def _first_str(spans: Sequence[Span], keys: Sequence[str]) -> str | None:
    for key in keys:
        for span in spans:
            value = as_str(span.attributes.get(key))
            if value:
                return value
    return None


def _case_field(spans: Sequence[Span], keys: Sequence[str]) -> str | None:
    if not keys:
        return None
    found = _first_str(spans, keys)
    if found:
        return found
    for key in keys:
        value = as_str(spans[0].resource.get(key))
        if value:
            return value
    return None
