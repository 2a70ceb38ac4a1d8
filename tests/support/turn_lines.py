"""Turns as JSON lines files, the input and output of the batch commands (``casewatch judge``,
``compare``, ``agreement``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def turn(event_id: str, conversation: str = "c1", index: int = 0, **extra: Any) -> dict[str, Any]:
    """A turn event document (a JSON object), ``extra`` fields set or replaced."""
    return {
        "event_id": event_id,
        "conversation_id": conversation,
        "turn_index": index,
        "timestamp": "2026-11-02T10:00:00Z",
        "assistant": {"name": "helpbot", "version": "1.4", "model": "m-1"},
        "case": {"subject": "VPN error 809", "description": "VPN drops with error 809"},
        "query": "How do I fix error 809?",
        "contexts": [{"id": "kb-1", "text": "Error 809: open UDP 500 and 4500 on the firewall."}],
        "answer": "Open UDP ports 500 and 4500 on the firewall, then reconnect.",
        **extra,
    }


def write_lines(path: Path, lines: list[bytes]) -> Path:
    """``lines`` written to ``path``, one a line."""
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def jsonl(path: Path) -> list[dict[str, Any]]:
    """Every line of ``path`` as a JSON document."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def dump(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc).encode()


ANSWERS = [
    "Open UDP ports 500 and 4500 on the firewall, then reconnect.",
    "Reinstall the operating system.",
    "Error 809 means the VPN server is down; wait an hour.",
    "Check that UDP 500 and 4500 are open (kb-1), then reconnect the VPN.",
]


def stable_and_canary(tmp_path: Path, conversations: int = 6) -> tuple[Path, Path]:
    """Two files of the same ``conversations`` (two turns each) answered by a stable and a
    canary version, the answers drawn from ``ANSWERS`` (good and bad alike)."""
    stable, canary = [], []
    for c in range(conversations):
        for t in range(2):
            stable.append(dump(turn(f"s-{c}-{t}", f"c{c}", t, answer=ANSWERS[(c + t) % 4])))
            canary_turn = turn(f"k-{c}-{t}", f"c{c}", t, answer=ANSWERS[(c * t + 1) % 4])
            canary_turn["assistant"]["version"] = "1.5-canary"
            canary.append(dump(canary_turn))
    return (
        write_lines(tmp_path / "stable.jsonl", stable),
        write_lines(tmp_path / "canary.jsonl", canary),
    )
