"""What the live rules tests share: examples/ split into healthy and flawed turns, the turns
re-stamped as fresh events."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "rules" / "casewatch.rules.yml"
EXAMPLES = ROOT / "examples"
STABLE, CANARY = "acme-support-stable", "acme-support-canary"
DEADLINE_S = 600.0  # generous: a loaded 2-core machine; the first target sync alone takes ~6 s


def examples() -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """Flawless turns per assistant, and the canary's flawed turns."""
    flaw = {
        d["event_id"]: d["flaw"]
        for d in map(json.loads, (EXAMPLES / "flaws.jsonl").read_text().splitlines())
    }
    docs = [json.loads(line) for line in (EXAMPLES / "turns.jsonl").read_text().splitlines()]
    healthy: dict[str, list[dict[str, Any]]] = {STABLE: [], CANARY: []}
    flawed = []
    for doc in docs:
        if flaw[doc["event_id"]] == "none":
            healthy[doc["assistant"]["name"]].append(doc)
        elif doc["assistant"]["name"] == CANARY:
            flawed.append(doc)
    return healthy, flawed


def values(docs: list[dict[str, Any]], tag: str, at: datetime | None = None) -> list[bytes]:
    """The docs as fresh events: a unique event id per ``tag``, timestamp ``at`` (now)."""
    stamp = (at or datetime.now(UTC)).isoformat().replace("+00:00", "Z")
    return [
        json.dumps({**d, "event_id": f"{d['event_id']}#{tag}", "timestamp": stamp}).encode()
        for d in docs
    ]
