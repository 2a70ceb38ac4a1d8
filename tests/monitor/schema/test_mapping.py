"""``format: mapped``: two event shapes become turns; a bad expression is refused at start; an
event the mapping cannot fill is poison naming the field."""

from __future__ import annotations

import json

import pytest

from monitor.errors import InvalidEvent
from monitor.schema.mapping import MappingError, TurnMapping

# A chat log shape: nested request/response, documents under retrieval.
CHAT_LOG = {
    "event_id": "id",
    "conversation_id": "session.id",
    "timestamp": "ts",
    "assistant.name": "'helpdesk'",
    "assistant.model": "llm.model",
    "query": "request.messages[?role=='user'] | [-1].text",
    "answer": "response.text",
    "contexts": "retrieval.docs[].{id: doc_id, text: body, score: relevance}",
    "case.subject": "ticket.title",
}
# A flat analytics shape.
FLAT = {
    "event_id": "uuid",
    "conversation_id": "thread",
    "timestamp": "created_at",
    "assistant.name": "bot",
    "query": "question",
    "answer": "reply",
    "turn_index": "n",
}


def test_two_event_shapes_become_turns() -> None:
    chat = TurnMapping.compile(CHAT_LOG).decode(
        json.dumps(
            {
                "id": "e1",
                "session": {"id": "s1"},
                "ts": "2026-11-28T10:00:00Z",
                "llm": {"model": "m"},
                "request": {
                    "messages": [
                        {"role": "user", "text": "first"},
                        {"role": "user", "text": "My VPN drops"},
                    ]
                },
                "response": {"text": "Update the client."},
                "retrieval": {
                    "docs": [{"doc_id": "d1", "body": "VPN 4.2 fixes drops", "relevance": 0.7}]
                },
                "ticket": {"title": "VPN"},
            }
        ).encode(),
        max_bytes=10_000,
    )
    assert (chat.event_id, chat.conversation_id, chat.assistant.name) == ("e1", "s1", "helpdesk")
    assert chat.query == "My VPN drops"
    assert [(c.id, c.text, c.score) for c in chat.contexts] == [("d1", "VPN 4.2 fixes drops", 0.7)]
    assert chat.case.subject == "VPN"
    flat = TurnMapping.compile(FLAT).decode(
        json.dumps(
            {
                "uuid": "u9",
                "thread": "t9",
                "created_at": "2026-11-28T10:00:00+00:00",
                "bot": "b",
                "question": "q?",
                "reply": "a.",
                "n": 3,
            }
        ).encode(),
        max_bytes=10_000,
    )
    assert (flat.turn_index, flat.query, flat.answer, flat.case.subject) == (3, "q?", "a.", "")


def test_an_expression_that_does_not_compile_is_refused_naming_its_key() -> None:
    with pytest.raises(MappingError, match=r"mapping\.answer: 'response\.\[' is not a JMESPath"):
        TurnMapping.compile({**FLAT, "answer": "response.["})


def test_unknown_and_missing_fields_are_refused() -> None:
    with pytest.raises(MappingError, match=r"mapping\.answr: not a turn-event field"):
        TurnMapping.compile({**FLAT, "answr": "x"})
    without = dict(FLAT)
    del without["answer"]
    with pytest.raises(MappingError, match=r"without an expression: answer$"):
        TurnMapping.compile(without)


def test_every_unknown_and_missing_field_is_listed_at_once() -> None:
    mapping = {k: v for k, v in FLAT.items() if k not in ("answer", "query")}
    with pytest.raises(MappingError) as err:
        TurnMapping.compile({**mapping, "answr": "x", "refrence": "y"})
    message = str(err.value)
    assert "mapping.answr: not a turn-event field (did you mean answer?)" in message
    assert "mapping.refrence: not a turn-event field (did you mean reference?)" in message
    assert "required field(s) without an expression: query, answer" in message


def test_an_event_the_mapping_cannot_fill_names_the_field() -> None:
    mapping = TurnMapping.compile(FLAT)
    event = {"uuid": "u", "thread": "t", "created_at": "2026-11-28T10:00:00Z", "bot": "b"}
    with pytest.raises(InvalidEvent) as err:
        mapping.decode(json.dumps({**event, "question": "q"}).encode(), 10_000)
    assert err.value.reason == "mapping_unfilled"
    assert "'answer'" in err.value.detail and "'reply'" in err.value.detail


def test_values_that_do_not_make_a_turn_are_schema_errors() -> None:
    mapping = TurnMapping.compile(FLAT)
    event = {
        "uuid": "u",
        "thread": "t",
        "created_at": "not a time",
        "bot": "b",
        "question": "q",
        "reply": "a",
    }
    with pytest.raises(InvalidEvent) as err:
        mapping.decode(json.dumps(event).encode(), 10_000)
    assert err.value.reason == "schema"
    assert "timestamp" in err.value.detail
    assert "not a time" not in err.value.detail
