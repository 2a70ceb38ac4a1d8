from __future__ import annotations

import json

import pytest

from consumers.decode import DLQ_REASONS, MAX_DETAIL_CHARS, decode_value
from monitor.errors import InvalidEvent
from tests.consumers.turns import turn_bytes, turn_dict

LIMIT = 64 * 1024


def reason_of(value: bytes | None, limit: int = LIMIT) -> InvalidEvent:
    with pytest.raises(InvalidEvent) as info:
        decode_value(value, limit)
    assert info.value.reason in DLQ_REASONS
    return info.value


def test_valid_event_decodes() -> None:
    turn = decode_value(turn_bytes("e-42", conversation_id="c-9"), LIMIT)
    assert (turn.event_id, turn.conversation_id, turn.assistant.name) == ("e-42", "c-9", "helpdesk")


def test_unknown_fields_are_kept() -> None:
    turn = decode_value(json.dumps(turn_dict(producer_note="x")).encode(), LIMIT)
    assert turn.model_extra == {"producer_note": "x"}


@pytest.mark.parametrize("value", [None, b""])
def test_empty(value: bytes | None) -> None:
    assert reason_of(value).reason == "empty"


def test_too_large_is_checked_before_parsing() -> None:
    # Not JSON at all: only the size check can have rejected it.
    err = reason_of(b"x" * 101, limit=100)
    assert err.reason == "too_large"
    assert "101" in err.detail and "100" in err.detail


def test_exactly_at_the_limit_is_parsed() -> None:
    value = turn_bytes()
    assert decode_value(value, len(value)).event_id == "evt-1"


def test_bad_utf8_names_the_byte() -> None:
    err = reason_of(b'{"event_id": "\xff\xfe"}')
    assert err.reason == "bad_utf8"
    assert "byte 14" in err.detail


def test_bad_utf8_inside_an_otherwise_valid_turn_is_bad_utf8_not_schema() -> None:
    # Parsed straight from bytes: the parser's failure is re-examined to name the bad byte.
    value = turn_bytes().replace(b'"evt-1"', b'"evt-\xc3\x28"')
    err = reason_of(value)
    assert err.reason == "bad_utf8"
    assert f"byte {value.index(bytes([0xC3]))}" in err.detail


@pytest.mark.parametrize("encoded", [b"\xed\xa0\x80", b"\xf4\x90\x80\x80"])
def test_encoded_surrogate_or_out_of_range_code_point_is_bad_utf8(encoded: bytes) -> None:
    # Python's decoder rejects both; the bytes parser must not let them through either.
    assert (
        reason_of(turn_bytes().replace(b'"evt-1"', b'"evt-' + encoded + b'"')).reason == "bad_utf8"
    )


@pytest.mark.parametrize("value", [b"\xff{}", b'{"a": 1}\xfe', b"\xc3"])
def test_bad_utf8_outside_strings_is_bad_utf8(value: bytes) -> None:
    assert reason_of(value).reason == "bad_utf8"


@pytest.mark.parametrize("value", [b"{not json", b'{"a": 1} trailing', b"\x00"])
def test_not_json(value: bytes) -> None:
    assert reason_of(value).reason == "not_json"


@pytest.mark.parametrize("value", [b"[1, 2]", b'"a string"', b"42", b"null"])
def test_not_object(value: bytes) -> None:
    assert reason_of(value).reason == "not_object"


def test_schema_detail_names_fields_but_not_values() -> None:
    doc = turn_dict(turn_index=-1, query="SECRET-QUERY-TEXT")
    del doc["answer"]
    err = reason_of(json.dumps(doc).encode())
    assert err.reason == "schema"
    assert "answer: Field required" in err.detail
    assert "turn_index" in err.detail
    assert "SECRET-QUERY-TEXT" not in err.detail


def test_schema_detail_is_truncated() -> None:
    doc = turn_dict(history=[{"role": "nobody", "content": 1}] * 200)
    err = reason_of(json.dumps(doc).encode(), limit=10**6)
    assert err.reason == "schema"
    assert len(err.detail) == MAX_DETAIL_CHARS
    assert err.detail.endswith("…")


def test_reasons_constant_is_complete() -> None:
    assert set(DLQ_REASONS) == {
        "too_large",
        "empty",
        "bad_utf8",
        "not_json",
        "not_object",
        "schema",
    }
