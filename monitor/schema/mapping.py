"""Any JSON event shape → the turn event, by a declarative mapping (``format: mapped``; pure).

The mapping gives one JMESPath expression per turn-event field (dotted for nested fields:
``assistant.name``, ``case.subject``), evaluated with the ``jmespath`` library. Every expression
is compiled when the settings are checked, so one that does not compile stops casewatch at
start, naming its key. A constant is a JMESPath raw string: ``assistant.name: "'support-bot'"``.

An event the mapping cannot fill is ``InvalidEvent``: a required field whose expression found
nothing is ``mapping_unfilled`` naming the field and its expression; values that do not make a
valid turn are ``schema`` naming the fields (never their content).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jmespath
from jmespath.exceptions import JMESPathError
from pydantic import ValidationError

from monitor.errors import InvalidEvent, MappingError, truncate, validation_error_lines
from monitor.schema.turn import TurnEvent

# Fields a mapping may fill, dotted for nested ones; the required ones must be mapped.
REQUIRED_FIELDS: tuple[str, ...] = (
    "event_id",
    "conversation_id",
    "timestamp",
    "assistant.name",
    "query",
    "answer",
)
OPTIONAL_FIELDS: tuple[str, ...] = (
    "turn_index",
    "assistant.version",
    "assistant.model",
    "case.subject",
    "case.description",
    "case.product",
    "case.environment",
    "history",
    "contexts",
    "reference",
    "labels",
    "feedback",
    "trace_id",
    "span_id",
)
FIELDS = REQUIRED_FIELDS + OPTIONAL_FIELDS

# What an unmapped (or empty) optional field becomes.
_DEFAULTS: dict[str, Any] = {
    "turn_index": 0,
    "assistant.version": "",
    "assistant.model": "",
    "case.subject": "",
    "case.description": "",
}

MAPPED_DLQ_REASONS: tuple[str, ...] = (
    "empty",
    "too_large",
    "not_json",
    "not_object",
    "mapping_unfilled",
    "schema",
)
MAX_DETAIL_CHARS = 500


def _closest(key: str) -> str:
    close = difflib.get_close_matches(key, FIELDS, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


@dataclass(frozen=True)
class TurnMapping:
    expressions: Mapping[str, Any]  # field -> compiled expression
    sources: Mapping[str, str]  # field -> expression text (for messages)

    @classmethod
    def compile(cls, mapping: Mapping[str, str]) -> TurnMapping:
        # Every unknown and every missing field at once: fixing them one run at a time is slow.
        unknown = sorted(set(mapping) - set(FIELDS))
        problems = [f"mapping.{key}: not a turn-event field{_closest(key)}" for key in unknown]
        missing = [f for f in REQUIRED_FIELDS if f not in mapping]
        if missing:
            problems.append(
                f"mapping: required field(s) without an expression: {', '.join(missing)}"
            )
        if unknown:
            problems.append(f"known fields: {', '.join(FIELDS)}")
        if problems:
            raise MappingError("; ".join(problems))
        compiled: dict[str, Any] = {}
        for key, expression in mapping.items():
            if not isinstance(expression, str) or not expression.strip():
                raise MappingError(f"mapping.{key}: the expression is empty")
            try:
                compiled[key] = jmespath.compile(expression)
            except JMESPathError as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc)
                raise MappingError(
                    f"mapping.{key}: {expression!r} is not a JMESPath expression ({first})"
                ) from None
        return cls(compiled, dict(mapping))

    def fields(self, document: Any) -> dict[str, Any]:
        """The nested turn-event dict the expressions fill from ``document`` (pure)."""
        out: dict[str, Any] = {}
        for key in FIELDS:
            expression = self.expressions.get(key)
            value = expression.search(document) if expression is not None else None
            if value is None or value == "":
                if key in REQUIRED_FIELDS:
                    raise InvalidEvent(
                        "mapping_unfilled",
                        f"field {key!r}: expression {self.sources[key]!r} found nothing",
                    )
                value = _DEFAULTS.get(key)
                if value is None:
                    continue
            head, _, tail = key.partition(".")
            if tail:
                out.setdefault(head, {})[tail] = value
            else:
                out[key] = value
        return out

    def turn(self, document: Any) -> TurnEvent:
        try:
            return TurnEvent.model_validate(self.fields(document))
        except ValidationError as exc:
            summary = "mapped fields invalid: " + "; ".join(validation_error_lines(exc))
            raise InvalidEvent("schema", truncate(summary, MAX_DETAIL_CHARS)) from None

    def decode(self, value: bytes | None, max_bytes: int) -> TurnEvent:
        """One raw record → its turn, or ``InvalidEvent`` with the reason."""
        if not value:
            raise InvalidEvent("empty", "the record has no value")
        if len(value) > max_bytes:
            raise InvalidEvent("too_large", f"{len(value)} bytes > limit {max_bytes}")
        try:
            document = json.loads(value)
        except (UnicodeDecodeError, ValueError) as exc:
            raise InvalidEvent("not_json", f"{type(exc).__name__}") from None
        if not isinstance(document, dict):
            raise InvalidEvent("not_object", "the JSON value is not an object")
        return self.turn(document)
