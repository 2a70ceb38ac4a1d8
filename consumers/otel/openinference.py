"""OpenInference's span attributes (pure): ``openinference.span.kind`` LLM spans with
``llm.input_messages.N.message.*`` / ``llm.output_messages.N.message.*`` (or their multimodal
``contents.M.message_content.*``), RETRIEVER spans with ``input.value`` and
``retrieval.documents.N.document.{id,content,score}``, and ``session.id``."""

from __future__ import annotations

from collections.abc import Mapping

from consumers.otel.attribute_values import Document, Message, as_float, as_id, as_str
from consumers.otel.otlp import AttrValue

# The placeholder OpenInference writes when its hide-content switches are on.
REDACTED = "__REDACTED__"
SESSION_ID = "session.id"
MODEL = "llm.model_name"
HIDDEN_HINT = (
    "OpenInference hides content: unset OPENINFERENCE_HIDE_INPUTS, OPENINFERENCE_HIDE_OUTPUTS, "
    "OPENINFERENCE_HIDE_INPUT_MESSAGES and OPENINFERENCE_HIDE_OUTPUT_MESSAGES (or set them false)"
)


def is_llm(a: Mapping[str, AttrValue]) -> bool:
    return a.get("openinference.span.kind") == "LLM"


def is_span(a: Mapping[str, AttrValue]) -> bool:
    """Whether OpenInference wrote the span (any kind)."""
    return "openinference.span.kind" in a


def is_retriever(a: Mapping[str, AttrValue]) -> bool:
    return a.get("openinference.span.kind") == "RETRIEVER"


def input_messages(a: Mapping[str, AttrValue]) -> list[Message]:
    return _messages(a, "llm.input_messages")


def output_messages(a: Mapping[str, AttrValue]) -> list[Message]:
    return _messages(a, "llm.output_messages", "assistant")


def _messages(a: Mapping[str, AttrValue], prefix: str, default_role: str = "user") -> list[Message]:
    out: list[Message] = []
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
        out.append(Message(as_str(a.get(f"{base}.role")) or default_role, text))
        i += 1
    return out


def retrieval_query(a: Mapping[str, AttrValue]) -> str | None:
    value = a.get("input.value")
    if isinstance(value, str) and value and a.get("input.mime_type") != "application/json":
        return value
    return None


def documents(a: Mapping[str, AttrValue]) -> list[Document]:
    out: list[Document] = []
    i = 0
    while any(k.startswith(f"retrieval.documents.{i}.") for k in a):
        base = f"retrieval.documents.{i}.document"
        text = a.get(f"{base}.content")
        out.append(
            Document(
                as_id(a.get(f"{base}.id")),
                text if isinstance(text, str) and text else None,
                as_float(a.get(f"{base}.score")),
            )
        )
        i += 1
    return out
