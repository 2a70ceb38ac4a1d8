"""Turns to hold the identifier tripwire's decisions against: the examples and their mutations.

The example sets alone trip the tripwire a few dozen times; a change to how it searches could
keep those and lose others. So each turn is also checked with deterministic corruptions: an
identifier of its answer edited once or twice (swap, substitution, deletion, insertion, and a
three-edit one that should not trip), and an identifier of its evidence corrupted and appended
to the answer (that is the near search across the whole pool). The tokens are picked with this
module's own pattern, not the tripwire's, so the corpus does not move when the tripwire does.

``python -m tests.monitor.judging.heuristic.tripwire_corpus`` rewrites the expected decisions
(``tripwire_expected.json``) with the tripwire as it is: do that only for a deliberate change of
what it detects, never to make a speed-up pass.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from monitor.judging.heuristic.tripwire import TripwireHit, identifier_tripwire
from monitor.schema.turn import TurnEvent

ROOT = Path(__file__).resolve().parents[4]
SETS = (
    ROOT / "examples" / "turns.jsonl",
    ROOT / "examples" / "heldout" / "dev.jsonl",
    ROOT / "examples" / "heldout" / "test.jsonl",
)
EXPECTED = Path(__file__).resolve().parent / "tripwire_expected.json"

_WORD = re.compile(r"[^\s`'\"()\[\]<>,;!?*=]+")
_ID_LIKE = re.compile(r"[\d_./:@]|\w-\w|^[A-Z]{3,}$")


# One hand-made passage with an identifier of each kind (host, port, path, config key,
# resource, URL template, version), and a turn answering from it: the unit tests' near misses.
CONTEXT = (
    "Runners reach the remote cache at cache.foundry.example over HTTPS on port 9443. Set "
    "FOUNDRY_CACHE_DIR in /etc/foundry/runner.env and restart with "
    "`sudo systemctl restart foundry-runner`. List invoices with GET "
    "https://api.example.com/v1/customers/{customer_id}/invoices. Fixed in 4.8.2."
)


def turn(answer: str, **overrides: Any) -> TurnEvent:
    """A turn whose evidence is ``CONTEXT`` and whose answer is ``answer``."""
    event: dict[str, Any] = {
        "event_id": "e-1",
        "conversation_id": "c-1",
        "turn_index": 0,
        "timestamp": "2026-11-02T08:00:00Z",
        "assistant": {"name": "a", "version": "1", "model": "m"},
        "case": {"subject": "Runner cache unavailable", "description": "Volume vol-data-4417."},
        "query": "Which port?",
        "contexts": [{"id": "kb-1", "text": CONTEXT}],
        "answer": answer,
    }
    event.update(overrides)
    return TurnEvent.model_validate(event)


def _next_char(c: str) -> str:
    if c.isdigit():
        return str((int(c) + 1) % 10)
    if "a" <= c <= "z":
        return chr((ord(c) - ord("a") + 1) % 26 + ord("a"))
    if "A" <= c <= "Z":
        return chr((ord(c) - ord("A") + 1) % 26 + ord("A"))
    return "x"


def _substitute(t: str, *at: int) -> str:
    chars = list(t)
    for i in at:
        chars[i] = _next_char(chars[i])
    return "".join(chars)


def _swap(t: str) -> str:
    i = len(t) // 2
    return t[: i - 1] + t[i] + t[i - 1] + t[i + 1 :]


MUTATIONS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("swap", _swap),
    ("sub1", lambda t: _substitute(t, len(t) // 2)),
    ("del", lambda t: t[: len(t) // 2] + t[len(t) // 2 + 1 :]),
    ("ins", lambda t: t[: len(t) // 2] + t[len(t) // 2] + t[len(t) // 2 :]),
    ("sub2", lambda t: _substitute(t, len(t) // 3, 2 * len(t) // 3)),
    ("sub3", lambda t: _substitute(t, 0, len(t) // 2, len(t) - 1)),
)


def _identifiers(text: str) -> list[str]:
    seen: dict[str, None] = {}
    for m in _WORD.finditer(text):
        word = m.group(0).rstrip(".:")
        if len(word) >= 4 and _ID_LIKE.search(word):
            seen.setdefault(word, None)
    return list(seen)


def _spread(items: list[str], n: int) -> list[str]:
    """``n`` items spread over the list (first, last, in between)."""
    if len(items) <= n:
        return items
    return [items[round(k * (len(items) - 1) / (n - 1))] for k in range(n)] if n > 1 else items[:1]


def turns() -> Iterator[tuple[str, TurnEvent]]:
    """(case key, turn): every example turn, then its mutations."""
    for path in SETS:
        with path.open(encoding="utf-8") as f:
            originals = [TurnEvent.model_validate_json(line) for line in f if line.strip()]
        for n, turn in enumerate(originals):
            key = f"{path.stem}/{turn.event_id}"
            yield key, turn
            for k, token in enumerate(_spread(_identifiers(turn.answer), 3)):
                name, mutate = MUTATIONS[(n + k) % len(MUTATIONS)]
                answer = turn.answer.replace(token, mutate(token), 1)
                yield f"{key}/answer:{k}:{name}", turn.model_copy(update={"answer": answer})
            context = "\n".join(c.text for c in turn.contexts)
            for k, token in enumerate(_spread(_identifiers(context), 3)):
                name, mutate = MUTATIONS[(n + k + 3) % len(MUTATIONS)]
                answer = f"{turn.answer} Then check {mutate(token)} again."
                yield f"{key}/context:{k}:{name}", turn.model_copy(update={"answer": answer})


def describe(hit: TripwireHit) -> list[str]:
    """A hit's near misses, each as one comparable line, in a stable order."""
    return sorted(
        f"{m.found.kind.value}: {m.found.raw!r} ~ {m.expected.raw!r} "
        f"(norm {m.found.norm!r} ~ {m.expected.norm!r}, {m.distance}, {m.reason})"
        for m in hit.misses
    )


def decisions() -> tuple[int, dict[str, list[str]]]:
    """How many turns were checked, and the near misses of those that tripped it."""
    checked = 0
    hits: dict[str, list[str]] = {}
    for key, turn in turns():
        checked += 1
        hit = identifier_tripwire(turn)
        if hit:
            hits[key] = describe(hit)
    return checked, hits


if __name__ == "__main__":
    n, found = decisions()
    EXPECTED.write_text(json.dumps({"checked": n, "hits": found}, indent=1, sort_keys=True) + "\n")
    print(f"{n} turns, {len(found)} tripped: {EXPECTED}")
