"""The demo's input: the example turns, found, read and replayed loop after loop.

Pure: tested without a broker. ``demo_messages`` gives each loop's records (event ids made
unique per loop, timestamps refreshed, a few malformed records so the dead-letter counters move).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from monitor.errors import DemoError

EXAMPLES = Path("examples") / "turns.jsonl"
# One of each kind of poison the decoder tells apart, spread through every loop.
MALFORMED: tuple[bytes, ...] = (
    b"this is not JSON {",
    b'{"event_id": "demo-malformed", "query": "a turn with most fields missing"}',
    b'["a JSON array, not an object"]',
)


def find_examples(explicit: Path | None = None, *, cwd: Path | None = None) -> Path:
    """``explicit``, else examples/turns.jsonl under the working directory or the checkout."""
    if explicit is not None:
        if not explicit.is_file():
            raise DemoError(f"examples file {explicit} does not exist")
        return explicit
    here = (cwd or Path.cwd()) / EXAMPLES
    checkout = Path(__file__).resolve().parents[2] / EXAMPLES
    for candidate in (here, checkout):
        if candidate.is_file():
            return candidate
    raise DemoError(
        f"cannot find {EXAMPLES} (looked in {here} and {checkout}); run from the casewatch "
        "checkout or pass --examples FILE"
    )


def load_examples(path: Path) -> list[dict[str, Any]]:
    """The turn documents of a JSONL file (validated later by the daemon, like any input)."""
    docs: list[dict[str, Any]] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DemoError(f"cannot read examples file {path}: {exc}") from exc
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except ValueError as exc:
            raise DemoError(f"{path}:{n}: not JSON ({exc})") from exc
        if not isinstance(doc, dict) or "event_id" not in doc:
            raise DemoError(f"{path}:{n}: not a turn event (a JSON object with an event_id)")
        docs.append(doc)
    if not docs:
        raise DemoError(f"examples file {path} holds no turn events")
    return docs


def demo_messages(
    docs: list[dict[str, Any]], n_loop: int, now: Callable[[], datetime]
) -> Iterator[tuple[bytes | None, bytes]]:
    """One loop of (key, value): every doc with ``#<loop>`` on its event_id and its
    conversation_id (each loop's conversations are new cases, judged once they go quiet, not
    one conversation growing loop after loop) and a fresh timestamp (taken lazily, at send
    time), and the MALFORMED records spread evenly."""
    step = max(1, len(docs) // (len(MALFORMED) + 1))
    poison = {step * (i + 1): value for i, value in enumerate(MALFORMED)}
    for i, doc in enumerate(docs):
        if i in poison:
            yield None, poison[i]
        out = {**doc, "event_id": f"{doc['event_id']}#{n_loop}"}
        if out.get("conversation_id") is not None:
            out["conversation_id"] = f"{out['conversation_id']}#{n_loop}"
        out["timestamp"] = now().isoformat().replace("+00:00", "Z")
        conv = out.get("conversation_id")
        yield (str(conv).encode() if conv is not None else None), json.dumps(out).encode()
    for i in sorted(poison):  # a file shorter than the spread still gets all of them
        if i >= len(docs):
            yield None, poison[i]


__all__ = ["EXAMPLES", "MALFORMED", "DemoError", "demo_messages", "find_examples", "load_examples"]
