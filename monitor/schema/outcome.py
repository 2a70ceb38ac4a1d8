"""Outcome events: what the customers said and what became of their cases (schema v1; pure).

A second kind of event beside the turn event, read from a topic of kind ``outcomes`` (or a
file): feedback on one turn (thumbs, a rating on the scale the event declares, an optional
comment) keyed by the turn's ``event_id``, and the outcomes of a case (handed to a person,
resolved, reopened, a satisfaction score) keyed by ``conversation_id``. Every event has an id
of its own (``outcome_id``): the store keeps one row per id, so a replayed or duplicated event
changes nothing. ``casewatch schema --event outcome`` prints ``OutcomeEvent``'s JSON schema.

``decode_outcome`` reads casewatch's own shape, ``OutcomeMapping`` a team's own shape through
JMESPath expressions (``format: mapped``, ``outcome_mapping`` in the settings), both raising
``InvalidEvent`` with a bounded reason for the dead-letter topic: a rating outside its scale
is ``out_of_scale``, anything else wrong is a reason of ``OUTCOME_DLQ_REASONS``. Details name
fields, never their values (they end up in logs and dead-letter headers).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import jmespath
from jmespath.exceptions import JMESPathError
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from monitor.errors import InvalidEvent, MappingError, truncate, validation_error_lines
from monitor.schema.turn import Id

OutcomeKind = Literal["feedback", "handed_off", "resolved", "reopened", "satisfaction"]
OUTCOME_KINDS: tuple[str, ...] = ("feedback", "handed_off", "resolved", "reopened", "satisfaction")
# What a feedback or a satisfaction score says, once read on its scale.
Polarity = Literal["negative", "neutral", "positive"]
# The bounded ``kind`` label of casewatch_outcomes_total: feedback split by polarity.
SIGNAL_KINDS: tuple[str, ...] = (
    "feedback_negative",
    "feedback_neutral",
    "feedback_positive",
    "handed_off",
    "resolved",
    "reopened",
    "satisfaction_negative",
    "satisfaction_neutral",
    "satisfaction_positive",
)
OUTCOME_DLQ_REASONS: tuple[str, ...] = (
    "empty",
    "too_large",
    "bad_utf8",
    "not_json",
    "not_object",
    "mapping_unfilled",
    "out_of_scale",
    "schema",
)
MAX_DETAIL_CHARS = 500
MAX_COMMENT_CHARS = 4000


class Rating(BaseModel):
    """A rating on the scale the producer declares (1..5 stars, 0..10 NPS-like, ...)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float
    scale_min: float = 1.0
    scale_max: float = 5.0

    @model_validator(mode="after")
    def _on_scale(self) -> Rating:
        if not self.scale_min < self.scale_max:
            raise ValueError("out_of_scale: scale_min must be below scale_max")
        if not self.scale_min <= self.value <= self.scale_max:
            raise ValueError("out_of_scale: value outside [scale_min, scale_max]")
        return self

    @property
    def polarity(self) -> Polarity:
        """Below the scale's middle is negative, above it positive, the middle neutral."""
        position = (self.value - self.scale_min) / (self.scale_max - self.scale_min)
        if position < 0.5:
            return "negative"
        return "positive" if position > 0.5 else "neutral"


class OutcomeEvent(BaseModel):
    """Feedback on a turn, or an outcome of a case, as published on an outcomes topic."""

    model_config = ConfigDict(extra="allow", frozen=True)

    outcome_id: Id = Field(description="Idempotency key: the same id is stored and counted once.")
    kind: OutcomeKind
    assistant: Id = Field(description="The assistant the turn or case belongs to.")
    timestamp: datetime
    turn_event_id: Id | None = Field(
        default=None, description="The turn's event_id (required for feedback)."
    )
    conversation_id: Id | None = Field(
        default=None, description="The case's conversation_id (required for case outcomes)."
    )
    thumbs: Literal["up", "down"] | None = None
    rating: Rating | None = Field(default=None, description="Feedback rating or satisfaction.")
    comment: str | None = Field(default=None, max_length=MAX_COMMENT_CHARS)

    @model_validator(mode="after")
    def _keyed(self) -> OutcomeEvent:
        if self.kind == "feedback":
            if self.turn_event_id is None:
                raise ValueError("feedback names its turn: turn_event_id is required")
            if self.thumbs is None and self.rating is None:
                raise ValueError("feedback carries thumbs or a rating")
        elif self.conversation_id is None:
            raise ValueError(f"a {self.kind} outcome names its case: conversation_id is required")
        if self.kind == "satisfaction" and self.rating is None:
            raise ValueError("a satisfaction outcome carries a rating")
        return self

    @property
    def polarity(self) -> Polarity | None:
        """What the feedback or satisfaction says (None for the other outcomes). Thumbs win
        over a rating when both are given."""
        if self.thumbs is not None:
            return "negative" if self.thumbs == "down" else "positive"
        if self.rating is not None:
            return self.rating.polarity
        return None

    @property
    def signal_kind(self) -> str:
        """The bounded ``kind`` label this event counts under (``SIGNAL_KINDS``)."""
        polarity = self.polarity
        if self.kind in ("feedback", "satisfaction") and polarity is not None:
            return f"{self.kind}_{polarity}"
        return self.kind

    @property
    def negative(self) -> bool:
        return self.kind == "feedback" and self.polarity == "negative"


def _invalid(exc: ValidationError, prefix: str) -> InvalidEvent:
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    first = errors[0] if errors else None
    if first is not None and first["type"] == "json_invalid":
        return InvalidEvent("not_json", truncate(first["msg"], MAX_DETAIL_CHARS))
    if first is not None and first["type"] == "model_type" and not first["loc"]:
        return InvalidEvent("not_object", "the JSON value is not an object")
    lines = validation_error_lines(exc)
    reason = "out_of_scale" if any("out_of_scale" in line for line in lines) else "schema"
    summary = f"{prefix}{len(errors)} validation error(s): " + "; ".join(lines)
    return InvalidEvent(reason, truncate(summary, MAX_DETAIL_CHARS))


_VALIDATE_JSON = OutcomeEvent.__pydantic_validator__.validate_json


def decode_outcome(value: bytes | None, max_bytes: int) -> OutcomeEvent:
    """A record's value → ``OutcomeEvent``; ``InvalidEvent`` with the reason."""
    if not value:
        raise InvalidEvent("empty", "the record has no value")
    if len(value) > max_bytes:
        raise InvalidEvent("too_large", f"{len(value)} bytes > limit {max_bytes}")
    try:
        event: OutcomeEvent = _VALIDATE_JSON(value)
        return event
    except ValidationError as exc:
        try:
            value.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise InvalidEvent("bad_utf8", f"invalid UTF-8 at byte {bad.start}") from None
        raise _invalid(exc, "") from None


# Fields an outcome mapping may fill, dotted for the rating's; the required ones must be mapped.
MAPPING_REQUIRED: tuple[str, ...] = ("outcome_id", "kind", "assistant", "timestamp")
MAPPING_OPTIONAL: tuple[str, ...] = (
    "turn_event_id",
    "conversation_id",
    "thumbs",
    "rating.value",
    "rating.scale_min",
    "rating.scale_max",
    "comment",
)
MAPPING_FIELDS = MAPPING_REQUIRED + MAPPING_OPTIONAL


@dataclass(frozen=True)
class OutcomeMapping:
    """A team's own outcome shape → ``OutcomeEvent``, one JMESPath expression per field
    (constants as raw strings: ``kind: "'feedback'"``); compiled when the settings are read."""

    expressions: Mapping[str, Any]
    sources: Mapping[str, str]

    @classmethod
    def compile(cls, mapping: Mapping[str, str]) -> OutcomeMapping:
        problems = []
        for key in sorted(set(mapping) - set(MAPPING_FIELDS)):
            close = difflib.get_close_matches(key, MAPPING_FIELDS, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]}?)" if close else ""
            problems.append(f"outcome_mapping.{key}: not an outcome-event field{hint}")
        missing = [f for f in MAPPING_REQUIRED if f not in mapping]
        if missing:
            problems.append(
                "outcome_mapping: required field(s) without an expression: " + ", ".join(missing)
            )
        if problems:
            raise MappingError("; ".join(problems))
        compiled: dict[str, Any] = {}
        for key, expression in mapping.items():
            if not isinstance(expression, str) or not expression.strip():
                raise MappingError(f"outcome_mapping.{key}: the expression is empty")
            try:
                compiled[key] = jmespath.compile(expression)
            except JMESPathError:
                raise MappingError(
                    f"outcome_mapping.{key}: {expression!r} is not a JMESPath expression"
                ) from None
        return cls(compiled, dict(mapping))

    def fields(self, document: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, expression in self.expressions.items():
            value = expression.search(document)
            if value is None or value == "":
                if key in MAPPING_REQUIRED:
                    raise InvalidEvent(
                        "mapping_unfilled",
                        f"field {key!r}: expression {self.sources[key]!r} found nothing",
                    )
                continue
            head, _, tail = key.partition(".")
            if tail:
                out.setdefault(head, {})[tail] = value
            else:
                out[key] = value
        return out

    def decode(self, value: bytes | None, max_bytes: int) -> OutcomeEvent:
        if not value:
            raise InvalidEvent("empty", "the record has no value")
        if len(value) > max_bytes:
            raise InvalidEvent("too_large", f"{len(value)} bytes > limit {max_bytes}")
        try:
            document = json.loads(value)
        except (UnicodeDecodeError, ValueError) as exc:
            raise InvalidEvent("not_json", type(exc).__name__) from None
        if not isinstance(document, dict):
            raise InvalidEvent("not_object", "the JSON value is not an object")
        try:
            return OutcomeEvent.model_validate(self.fields(document))
        except ValidationError as exc:
            raise _invalid(exc, "mapped fields invalid: ") from None


def outcome_schema() -> dict[str, Any]:
    """The JSON schema ``casewatch schema --event outcome`` prints."""
    doc = OutcomeEvent.model_json_schema()
    doc["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    doc["title"] = "casewatch OutcomeEvent v1"
    return doc
