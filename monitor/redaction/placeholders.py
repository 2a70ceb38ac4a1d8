"""The placeholders redaction writes in place of personal data, and how they are recognised.

A placeholder is ``<KIND_ID>``: ``KIND`` names what was there (``EMAIL``, ``PHONE``, ``CARD``,
``IBAN``, ``SECRET``, ``IP``, ``HOST`` or an operator pattern's name in capitals) and ``ID`` is
either a small number, counted per kind in order of first appearance within one turn
(``<EMAIL_1>``), or, when a pseudonymization key is configured, the first hex digits of a keyed
hash of the value (``<EMAIL_3f9a0c1d2e>``), the same in every turn of every conversation.
Neither carries any character of the value.

The judges, the heuristic judge and the identifier tripwire read placeholders as identifiers:
two different placeholders of one kind are two different values, equal ones the same value.
"""

from __future__ import annotations

import hashlib
import hmac
import re

__all__ = ["HASH_DIGITS", "PLACEHOLDER", "PLACEHOLDER_BODY", "Pseudonymizer", "is_placeholder"]

# KIND: capitals, digits and inner underscores; ID: a decimal count or hex digits.
PLACEHOLDER = re.compile(r"<([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*?)_([0-9]+|[0-9a-f]{10})>")
# The same without brackets or groups, to embed in other patterns.
PLACEHOLDER_BODY = r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*?_(?:[0-9]+|[0-9a-f]{10})"
HASH_DIGITS = 10  # 40 bits: collisions among one conversation's values are negligible


def is_placeholder(token: str) -> bool:
    return PLACEHOLDER.fullmatch(token) is not None


class Pseudonymizer:
    """Placeholders for one turn: the same (kind, normalised value) gets the same placeholder.

    Not thread-safe and not reused across turns: build one per turn (cheap), so no value
    outlives the turn in memory.
    """

    __slots__ = ("_counts", "_key", "_seen")

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key
        self._seen: dict[tuple[str, str], str] = {}
        self._counts: dict[str, int] = {}

    def placeholder(self, kind: str, normalised: str) -> str:
        entry = (kind, normalised)
        found = self._seen.get(entry)
        if found is not None:
            return found
        if self._key is not None:
            digest = hmac.new(self._key, f"{kind}\0{normalised}".encode(), hashlib.sha256)
            ident = digest.hexdigest()[:HASH_DIGITS]
        else:
            n = self._counts.get(kind, 0) + 1
            self._counts[kind] = n
            ident = str(n)
        made = f"<{kind}_{ident}>"
        self._seen[entry] = made
        return made

    @property
    def distinct(self) -> int:
        """How many distinct values got a placeholder."""
        return len(self._seen)
