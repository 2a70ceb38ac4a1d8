"""The OpenTelemetry GenAI semantic conventions, as a span's attributes carry them (pure).

Inference spans (``gen_ai.operation.name`` chat, text_completion or generate_content) with
``gen_ai.input.messages`` / ``gen_ai.output.messages`` (a JSON string on spans, or an array),
or the deprecated indexed ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` that OpenLLMetry
still emits; retrieval spans (``gen_ai.operation.name`` retrieval) with
``gen_ai.retrieval.query.text`` and ``gen_ai.retrieval.documents``. A reader returns None when
the span does not carry its attribute in this convention (``consumers.otel.openinference`` is
asked next).
"""

from __future__ import annotations

from collections.abc import Mapping

from consumers.otel.attribute_values import (
    Document,
    Message,
    as_float,
    as_id,
    as_str,
    json_value,
)
from consumers.otel.otlp import AttrValue

INFERENCE_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
CONVERSATION_ID = "gen_ai.conversation.id"
MODEL = ("gen_ai.response.model", "gen_ai.request.model")
CAPTURE_HINT = (
    "turn content capture on: OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only "
    "(or span_and_event) for the official GenAI instrumentations; `true` or event_only leave "
    "the spans without messages"
)


def is_inference(a: Mapping[str, AttrValue]) -> bool:
    if a.get("gen_ai.operation.name") in INFERENCE_OPERATIONS:
        return True
    return "gen_ai.completion.0.content" in a or "gen_ai.prompt.0.content" in a


def is_genai(a: Mapping[str, AttrValue]) -> bool:
    return "gen_ai.operation.name" in a


def is_retrieval(a: Mapping[str, AttrValue]) -> bool:
    return a.get("gen_ai.operation.name") == "retrieval"


def input_messages(a: Mapping[str, AttrValue]) -> list[Message] | None:
    if "gen_ai.input.messages" in a:
        return _messages(a["gen_ai.input.messages"])
    if "gen_ai.prompt.0.role" in a or "gen_ai.prompt.0.content" in a:
        return _indexed(a, "gen_ai.prompt.{}.role", "gen_ai.prompt.{}.content")
    return None


def output_messages(a: Mapping[str, AttrValue]) -> list[Message] | None:
    if "gen_ai.output.messages" in a:
        return _messages(a["gen_ai.output.messages"], default_role="assistant")
    if "gen_ai.completion.0.content" in a or "gen_ai.completion.0.role" in a:
        return _indexed(a, "gen_ai.completion.{}.role", "gen_ai.completion.{}.content", "assistant")
    return None


def _messages(value: AttrValue, default_role: str = "user") -> list[Message]:
    items = json_value(value)
    if not isinstance(items, list):
        return []
    out: list[Message] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        role = as_str(item.get("role")) or default_role
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
        out.append(Message(role, text))
    return out


def _indexed(
    a: Mapping[str, AttrValue], role_key: str, content_key: str, default_role: str = "user"
) -> list[Message]:
    out: list[Message] = []
    i = 0
    while role_key.format(i) in a or content_key.format(i) in a:
        content = a.get(content_key.format(i))
        out.append(
            Message(
                as_str(a.get(role_key.format(i))) or default_role,
                content if isinstance(content, str) else None,
            )
        )
        i += 1
    return out


def retrieval_query(a: Mapping[str, AttrValue]) -> str | None:
    query = a.get("gen_ai.retrieval.query.text")
    return query if isinstance(query, str) and query else None


def documents(a: Mapping[str, AttrValue]) -> list[Document] | None:
    if "gen_ai.retrieval.documents" not in a:
        return None
    items = json_value(a["gen_ai.retrieval.documents"])
    docs: list[Document] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            text = item.get("content", item.get("text"))
            docs.append(
                Document(
                    as_id(item.get("id")),
                    text if isinstance(text, str) and text else None,
                    as_float(item.get("score")),
                )
            )
    return docs
