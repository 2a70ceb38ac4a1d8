"""A complete trace → the turns it answered (pure; no I/O).

Two attribute families are read, whichever the instrumentation wrote:

- the OpenTelemetry GenAI semantic conventions: inference spans (``gen_ai.operation.name`` chat,
  text_completion or generate_content) with ``gen_ai.input.messages`` /
  ``gen_ai.output.messages`` (a JSON string on spans, or an array), the deprecated
  ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` that OpenLLMetry still emits, retrieval spans
  (``gen_ai.operation.name`` retrieval) with ``gen_ai.retrieval.query.text`` and
  ``gen_ai.retrieval.documents``;
- OpenInference: ``openinference.span.kind`` LLM spans with ``llm.input_messages.N.message.*`` /
  ``llm.output_messages.N.message.*``, RETRIEVER spans with ``input.value`` and
  ``retrieval.documents.N.document.{id,content,score}``, ``session.id``.

The evaluated span is the inference span that produced the answer, never the root or agent
span: its trace and span ids go with the turn (and make its event id, so a replayed trace is
the same turn). Attributes a turn needs may sit on any span of the trace (the official
instrumentation puts ``gen_ai.conversation.id`` on the agent span): the inference span is read
first, then its ancestors, then every other span, then the resource.

What cannot be judged is a ``Skipped`` with a bounded reason (``SKIP_REASONS``), never silence.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from consumers.otel.otlp import AttrValue, Span
from monitor.errors import truncate, validation_error_lines
from monitor.models import TurnEvent

# The placeholder OpenInference writes when its hide-content switches are on.
OPENINFERENCE_REDACTED = "__REDACTED__"

CAPTURE_HINT = (
    "turn content capture on: OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only "
    "(or span_and_event) for the official GenAI instrumentations; `true` or event_only leave "
    "the spans without messages"
)
HIDDEN_HINT = (
    "OpenInference hides content: unset OPENINFERENCE_HIDE_INPUTS, OPENINFERENCE_HIDE_OUTPUTS, "
    "OPENINFERENCE_HIDE_INPUT_MESSAGES and OPENINFERENCE_HIDE_OUTPUT_MESSAGES (or set them false)"
)

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

_INFERENCE_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
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


@dataclass(frozen=True)
class _Msg:
    role: str
    text: str | None  # None: the message carries no text (content off, or only a tool call)


@dataclass(frozen=True)
class _Doc:
    id: str | None
    text: str | None
    score: float | None


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
    if a.get("gen_ai.operation.name") in _INFERENCE_OPERATIONS:
        return True
    if a.get("openinference.span.kind") == "LLM":
        return True
    return "gen_ai.completion.0.content" in a or "gen_ai.prompt.0.content" in a


def _is_genai(span: Span) -> bool:
    a = span.attributes
    return "gen_ai.operation.name" in a or "openinference.span.kind" in a


def _is_retrieval(span: Span) -> bool:
    a = span.attributes
    return a.get("gen_ai.operation.name") == "retrieval" or (
        a.get("openinference.span.kind") == "RETRIEVER"
    )


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
    if any(t == OPENINFERENCE_REDACTED for t in texts):
        return skip("content_hidden", HIDDEN_HINT)
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
    conversation = _first_str(around, ("gen_ai.conversation.id", "session.id")) or span.trace_id
    resource = span.resource
    model = _first_str(around, ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name"))
    event: dict[str, Any] = {
        "event_id": f"otel-{span.trace_id}-{span.span_id}",
        "conversation_id": conversation,
        "turn_index": sum(1 for i in users if i != last_user),
        "timestamp": datetime.fromtimestamp(span.end_ns / 1e9, tz=UTC),
        "assistant": {
            "name": _str(resource.get("service.name")) or "unknown_service",
            "version": _str(resource.get("service.version")) or "",
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


def _input_messages(a: Mapping[str, AttrValue]) -> list[_Msg]:
    if "gen_ai.input.messages" in a:
        return _genai_messages(a["gen_ai.input.messages"])
    if "gen_ai.prompt.0.role" in a or "gen_ai.prompt.0.content" in a:
        return _indexed(a, "gen_ai.prompt.{}.role", "gen_ai.prompt.{}.content")
    return _openinference_messages(a, "llm.input_messages")


def _output_messages(a: Mapping[str, AttrValue]) -> list[_Msg]:
    if "gen_ai.output.messages" in a:
        return _genai_messages(a["gen_ai.output.messages"], default_role="assistant")
    if "gen_ai.completion.0.content" in a or "gen_ai.completion.0.role" in a:
        return _indexed(a, "gen_ai.completion.{}.role", "gen_ai.completion.{}.content", "assistant")
    return _openinference_messages(a, "llm.output_messages", "assistant")


def _json_value(value: AttrValue) -> Any:
    # On spans the structured attributes are JSON strings (attributes cannot nest there yet);
    # an OTLP array or kvlist value is read as it is.
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def _genai_messages(value: AttrValue, default_role: str = "user") -> list[_Msg]:
    items = _json_value(value)
    if not isinstance(items, list):
        return []
    out: list[_Msg] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        role = _str(item.get("role")) or default_role
        parts = item.get("parts")
        text: str | None = None
        if isinstance(parts, list):
            pieces = [
                p["content"]
                for p in parts
                if isinstance(p, dict)
                and p.get("type") == "text"
                and isinstance(p.get("content"), str)
            ]
            text = "\n".join(pieces) if pieces else None
        elif isinstance(item.get("content"), str):  # the earlier {role, content} shape
            text = item["content"]
        out.append(_Msg(role, text))
    return out


def _indexed(
    a: Mapping[str, AttrValue], role_key: str, content_key: str, default_role: str = "user"
) -> list[_Msg]:
    out: list[_Msg] = []
    i = 0
    while role_key.format(i) in a or content_key.format(i) in a:
        content = a.get(content_key.format(i))
        out.append(
            _Msg(
                _str(a.get(role_key.format(i))) or default_role,
                content if isinstance(content, str) else None,
            )
        )
        i += 1
    return out


def _openinference_messages(
    a: Mapping[str, AttrValue], prefix: str, default_role: str = "user"
) -> list[_Msg]:
    out: list[_Msg] = []
    i = 0
    while any(k.startswith(f"{prefix}.{i}.") for k in a):
        base = f"{prefix}.{i}.message"
        content = a.get(f"{base}.content")
        text = content if isinstance(content, str) else None
        if text is None:  # multimodal form: message.contents.M.message_content.text
            pieces = []
            j = 0
            while f"{base}.contents.{j}.message_content.type" in a or (
                f"{base}.contents.{j}.message_content.text" in a
            ):
                piece = a.get(f"{base}.contents.{j}.message_content.text")
                if isinstance(piece, str):
                    pieces.append(piece)
                j += 1
            text = "\n".join(pieces) if pieces else None
        out.append(_Msg(_str(a.get(f"{base}.role")) or default_role, text))
        i += 1
    return out


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
    query = a.get("gen_ai.retrieval.query.text")
    if isinstance(query, str) and query:
        return query
    value = a.get("input.value")
    if isinstance(value, str) and value and a.get("input.mime_type") != "application/json":
        return value
    return None


def _documents(span: Span) -> list[_Doc]:
    a = span.attributes
    if "gen_ai.retrieval.documents" in a:
        items = _json_value(a["gen_ai.retrieval.documents"])
        docs: list[_Doc] = []
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict):
                text = item.get("content", item.get("text"))
                docs.append(
                    _Doc(
                        _id(item.get("id")),
                        text if isinstance(text, str) and text else None,
                        _float(item.get("score")),
                    )
                )
        return docs
    out: list[_Doc] = []
    i = 0
    while any(k.startswith(f"retrieval.documents.{i}.") for k in a):
        base = f"retrieval.documents.{i}.document"
        text = a.get(f"{base}.content")
        out.append(
            _Doc(
                _id(a.get(f"{base}.id")),
                text if isinstance(text, str) and text else None,
                _float(a.get(f"{base}.score")),
            )
        )
        i += 1
    return out


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
            value = _str(span.attributes.get(key))
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
        value = _str(spans[0].resource.get(key))
        if value:
            return value
    return None


def _str(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def _id(value: object) -> str | None:
    text = _str(value)
    return text.strip()[:256] if text and text.strip() else None


def _float(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None
