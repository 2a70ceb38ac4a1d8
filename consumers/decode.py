"""Raw bytes → validated TurnEvent, or InvalidEvent with a bounded reason for the DLQ.

The size limit is checked before any parsing so an oversized record costs nothing but a
``len``. Details name what is wrong (field paths, JSON position) but never echo the input:
they end up in logs and DLQ headers.
"""

from __future__ import annotations

from pydantic import ValidationError

from monitor.errors import InvalidEvent, truncate, validation_error_lines
from monitor.schema.turn import TurnEvent

# Every reason decode_value can raise; bounded label values for casewatch_dead_letter_total.
DLQ_REASONS: tuple[str, ...] = (
    "too_large",
    "empty",
    "bad_utf8",
    "not_json",
    "not_object",
    "schema",
)

MAX_DETAIL_CHARS = 500

_VALIDATE_JSON = TurnEvent.__pydantic_validator__.validate_json


def decode_value(value: bytes | None, max_bytes: int) -> TurnEvent:
    """A record's value → TurnEvent (the decode step's, and the screening processes', one
    decoder of casewatch's own turn event); raises InvalidEvent with the reason."""
    if not value:
        raise InvalidEvent("empty", "the record has no value")
    if len(value) > max_bytes:
        raise InvalidEvent("too_large", f"{len(value)} bytes > limit {max_bytes}")
    try:
        # Straight from bytes: pydantic's parser checks UTF-8 itself, without a str copy. The
        # model's validator itself: ``model_validate_json`` only forwards its keyword defaults
        # to it, a Python call per record.
        turn: TurnEvent = _VALIDATE_JSON(value)
        return turn
    except ValidationError as exc:
        # Invalid UTF-8 fails the parse; only then is the record decoded, to name the byte.
        try:
            value.decode("utf-8")
        except UnicodeDecodeError as bad:
            detail = f"invalid UTF-8 at byte {bad.start}: {bad.reason}"
            raise InvalidEvent("bad_utf8", detail) from None
        raise _classify(exc) from None


def _classify(exc: ValidationError) -> InvalidEvent:
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    first = errors[0] if errors else None
    if first is not None and first["type"] == "json_invalid":
        return InvalidEvent("not_json", truncate(first["msg"], MAX_DETAIL_CHARS))
    if first is not None and first["type"] == "model_type" and not first["loc"]:
        return InvalidEvent("not_object", "the JSON value is not an object")
    summary = f"{len(errors)} validation error(s): " + "; ".join(validation_error_lines(exc))
    return InvalidEvent("schema", truncate(summary, MAX_DETAIL_CHARS))
