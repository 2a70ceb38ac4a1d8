"""Turn-event builders shared by the consumers tests."""

from __future__ import annotations

import json
from typing import Any

from monitor.schema.turn import TurnEvent


def turn_dict(
    event_id: str = "evt-1",
    *,
    conversation_id: str = "conv-1",
    assistant: str = "helpdesk",
    **overrides: Any,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "event_id": event_id,
        "conversation_id": conversation_id,
        "turn_index": 0,
        "timestamp": "2026-11-01T12:00:00Z",
        "assistant": {"name": assistant, "version": "1.0", "model": "m"},
        "case": {"subject": "VPN drops", "description": "VPN disconnects every hour"},
        "query": "Why does my VPN drop?",
        "contexts": [{"id": "kb-1", "text": "Set the keepalive to 30 s."}],
        "answer": "Set the keepalive to 30 s.",
    }
    doc.update(overrides)
    return doc


def turn_bytes(event_id: str = "evt-1", **kwargs: Any) -> bytes:
    return json.dumps(turn_dict(event_id, **kwargs)).encode()


def turn(event_id: str = "evt-1", **kwargs: Any) -> TurnEvent:
    return TurnEvent.model_validate(turn_dict(event_id, **kwargs))
