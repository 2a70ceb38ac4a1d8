"""The outcome event: what feedback and case outcomes say, and every way one is refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from monitor.errors import InvalidEvent, MappingError
from monitor.schema.outcome import (
    OUTCOME_DLQ_REASONS,
    SIGNAL_KINDS,
    OutcomeMapping,
    decode_outcome,
    outcome_schema,
)

MAX = 1 << 20


def event(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "outcome_id": "o-1",
        "kind": "feedback",
        "assistant": "helpdesk",
        "timestamp": "2026-03-01T12:00:00Z",
        "turn_event_id": "evt-1",
        "thumbs": "down",
    }
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


def decode(doc: dict[str, Any]) -> Any:
    return decode_outcome(json.dumps(doc).encode(), MAX)


@pytest.mark.parametrize(
    ("fields", "polarity", "kind"),
    [
        ({"thumbs": "down"}, "negative", "feedback_negative"),
        ({"thumbs": "up"}, "positive", "feedback_positive"),
        ({"thumbs": None, "rating": {"value": 2}}, "negative", "feedback_negative"),
        ({"thumbs": None, "rating": {"value": 3}}, "neutral", "feedback_neutral"),
        (
            {"thumbs": None, "rating": {"value": 9, "scale_min": 0, "scale_max": 10}},
            "positive",
            "feedback_positive",
        ),
        # Thumbs win over a rating when both are given.
        ({"thumbs": "up", "rating": {"value": 1}}, "positive", "feedback_positive"),
    ],
)
def test_feedback_polarity(fields: dict[str, Any], polarity: str, kind: str) -> None:
    outcome = decode(event(**fields))
    assert outcome.polarity == polarity
    assert outcome.signal_kind == kind
    assert outcome.signal_kind in SIGNAL_KINDS
    assert outcome.negative is (polarity == "negative")


def test_case_outcomes_are_keyed_by_conversation() -> None:
    for kind in ("handed_off", "resolved", "reopened"):
        outcome = decode(event(kind=kind, turn_event_id=None, thumbs=None, conversation_id="c-1"))
        assert (outcome.signal_kind, outcome.polarity, outcome.negative) == (kind, None, False)
    csat = decode(
        event(
            kind="satisfaction",
            turn_event_id=None,
            thumbs=None,
            conversation_id="c-1",
            rating={"value": 1, "scale_min": 1, "scale_max": 10},
        )
    )
    assert csat.signal_kind == "satisfaction_negative"


@pytest.mark.parametrize(
    ("value", "reason", "says"),
    [
        (b"", "empty", "no value"),
        (b"x" * (MAX + 1), "too_large", "limit"),
        (b"\xff\xfe{}", "bad_utf8", "UTF-8"),
        (b"{not json", "not_json", ""),
        (b"[1, 2]", "not_object", "not an object"),
        (json.dumps(event(rating={"value": 6})).encode(), "out_of_scale", "rating"),
        (
            json.dumps(event(rating={"value": 0, "scale_min": 1, "scale_max": 5})).encode(),
            "out_of_scale",
            "rating",
        ),
        (
            json.dumps(event(rating={"value": 1, "scale_min": 5, "scale_max": 5})).encode(),
            "out_of_scale",
            "scale_min",
        ),
        (json.dumps(event(turn_event_id=None)).encode(), "schema", "turn_event_id"),
        (json.dumps(event(thumbs=None)).encode(), "schema", "thumbs or a rating"),
        (
            json.dumps(event(kind="resolved", turn_event_id=None)).encode(),
            "schema",
            "conversation_id",
        ),
        (json.dumps(event(kind="liked")).encode(), "schema", "kind"),
        (json.dumps(event(thumbs="sideways")).encode(), "schema", "thumbs"),
        (json.dumps(event(assistant=None)).encode(), "schema", "assistant"),
    ],
)
def test_a_bad_event_names_its_reason(value: bytes, reason: str, says: str) -> None:
    with pytest.raises(InvalidEvent) as caught:
        decode_outcome(value, MAX)
    assert caught.value.reason == reason
    assert reason in OUTCOME_DLQ_REASONS
    assert says in caught.value.detail


def test_a_reason_never_echoes_the_comment() -> None:
    secret = "call me on +44 20 7946 0958"
    with pytest.raises(InvalidEvent) as caught:
        decode(event(rating={"value": 7}, comment=secret))
    assert secret not in caught.value.detail


MAPPING = {
    "outcome_id": "id",
    "kind": "'feedback'",
    "assistant": "bot.name",
    "timestamp": "created_at",
    "turn_event_id": "message.id",
    "thumbs": "vote",
    "rating.value": "stars",
    "comment": "text",
}


def test_a_mapped_shape_becomes_an_outcome() -> None:
    mapping = OutcomeMapping.compile(MAPPING)
    doc = {
        "id": "x-9",
        "bot": {"name": "acme"},
        "created_at": "2026-03-01T12:00:00Z",
        "message": {"id": "evt-4"},
        "stars": 1,
        "text": "useless",
    }
    outcome = mapping.decode(json.dumps(doc).encode(), MAX)
    assert (outcome.outcome_id, outcome.assistant, outcome.turn_event_id) == (
        "x-9",
        "acme",
        "evt-4",
    )
    assert outcome.signal_kind == "feedback_negative"
    assert outcome.comment == "useless"


def test_a_mapped_shape_is_refused_with_its_reason() -> None:
    mapping = OutcomeMapping.compile(MAPPING)
    base = {
        "id": "x-9",
        "bot": {"name": "acme"},
        "created_at": "2026-03-01T12:00:00Z",
        "message": {"id": "evt-4"},
    }
    with pytest.raises(InvalidEvent) as unfilled:
        mapping.decode(json.dumps({**base, "bot": {}}).encode(), MAX)
    assert unfilled.value.reason == "mapping_unfilled"
    assert "assistant" in unfilled.value.detail
    with pytest.raises(InvalidEvent) as off_scale:
        mapping.decode(json.dumps({**base, "stars": 11}).encode(), MAX)
    assert off_scale.value.reason == "out_of_scale"
    with pytest.raises(InvalidEvent) as no_vote:
        mapping.decode(json.dumps(base).encode(), MAX)
    assert no_vote.value.reason == "schema"


def test_a_mapping_is_checked_when_compiled() -> None:
    with pytest.raises(MappingError, match="did you mean thumbs"):
        OutcomeMapping.compile({**MAPPING, "thumb": "vote"})
    with pytest.raises(MappingError, match=r"required field.*assistant"):
        OutcomeMapping.compile({k: v for k, v in MAPPING.items() if k != "assistant"})
    with pytest.raises(MappingError, match="not a JMESPath expression"):
        OutcomeMapping.compile({**MAPPING, "thumbs": "vote[["})


def test_the_schema_is_the_model() -> None:
    doc = outcome_schema()
    assert doc["title"] == "casewatch OutcomeEvent v1"
    assert set(doc["required"]) == {"outcome_id", "kind", "assistant", "timestamp"}
    assert "rating" in doc["properties"]
