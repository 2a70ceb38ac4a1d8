"""What the GenAI conventions read from span attributes, whichever convention wrote them: a
message (role and text), a retrieved document (id, text, score), and the coercions of an
attribute value to a string, an id or a number (pure)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from consumers.otel.otlp import AttrValue


@dataclass(frozen=True)
class Message:
    role: str
    text: str | None  # None: the message carries no text (content off, or only a tool call)


@dataclass(frozen=True)
class Document:
    id: str | None
    text: str | None
    score: float | None


def json_value(value: AttrValue) -> Any:
    """A structured attribute: on spans a JSON string (attributes cannot nest there yet); an
    OTLP array or kvlist value is read as it is. None when the string is not JSON."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def as_str(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def as_id(value: object) -> str | None:
    text = as_str(value)
    return text.strip()[:256] if text and text.strip() else None


def as_float(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None
