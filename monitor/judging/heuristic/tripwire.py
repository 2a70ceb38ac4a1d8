"""The identifier tripwire: a corrupted identifier in any consumed turn, cheaply, no network.

The daemon runs this on every turn it consumes, sampled or not, so it has to cost a few
microseconds on a clean turn. It applies the judge's own near-miss rules
(``identifiers.find_near_miss``) but only where a corruption can be:

1. the answer's identifier-like tokens (anything with a digit, ``_``, ``.``, ``/``, ``:``,
   ``@`` or an inner ``-``, and ``UPPER_CASE`` words) that do not occur verbatim in the case,
   history, query or contexts: a copied identifier is a substring of its source, so a clean
   answer stops here after one split and a few substring searches;
2. for each of those, the evidence's identifier-like tokens within two edits of it (OSA
   distance, rapidfuzz, in C) or, for a URL, the evidence URLs on the same host;
3. for each such pair, both tokens are classified with ``identifiers.extract`` on a short
   window of their text (so "port 578" is a port, "4.12" after "version" a version) and
   compared kind by kind.

It sees less than the judge: a near miss it finds is one the judge finds too, but it does not
compare whole commands (a mistyped plain word inside one), and an identifier that is only
recognised from a wider context is missed. Pure functions, no state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from rapidfuzz.distance import OSA

from monitor.judging.heuristic.identifiers import NearMiss, extract, find_near_miss
from monitor.judging.heuristic.kinds import Identifier, IdKind
from monitor.models import TurnEvent

__all__ = ["TripwireHit", "identifier_tripwire"]

# Characters that make a token look like an identifier (besides an inner hyphen, UPPER_CASE).
_ID_CHARS = frozenset("0123456789_/@.:")
_STRIP = "`'\"()[]<>,;!?*"
_TAIL = ".:"
_MAX_EDITS = 2
_NEIGHBOURS = 3
_WINDOW = 32
_MIN_LEN = 3


@dataclass(frozen=True, slots=True)
class TripwireHit:
    """The near misses found in a turn (empty: nothing tripped)."""

    misses: tuple[NearMiss, ...]

    @property
    def kinds(self) -> tuple[str, ...]:
        """Each kind once, for bounded metric labels."""
        return tuple(sorted({m.found.kind.value for m in self.misses}))

    def __bool__(self) -> bool:
        return bool(self.misses)


_CLEAN = TripwireHit(())


def _is_identifier(token: str) -> bool:
    if len(token) < _MIN_LEN:
        return False
    if not _ID_CHARS.isdisjoint(token):
        return True
    return "-" in token[1:-1] or (token.isupper() and token.isalnum())


def _tokens(text: str) -> set[str]:
    """The identifier-like tokens of a text.

    This runs on every consumed turn: one split, a first cut with C-level string methods and no
    call per word, and the exact test only on what is left.
    """
    isdisjoint = _ID_CHARS.isdisjoint
    words = {w for w in text.split() if not isdisjoint(w) or "-" in w or w.isupper()}
    found: set[str] = set()
    for word in words:
        for part in word.split("=") if "=" in word else (word,):
            token = part.strip(_STRIP).rstrip(_TAIL).strip(_STRIP)
            if _is_identifier(token):
                found.add(token)
    return found


def _near(token: str, pool: frozenset[str]) -> list[str]:
    """Evidence identifiers within two edits of ``token`` (OSA distance, in C)."""
    n = len(token)
    near = [
        w
        for w in pool
        if abs(len(w) - n) <= _MAX_EDITS
        and w != token
        and OSA.distance(token, w, score_cutoff=_MAX_EDITS) <= _MAX_EDITS
    ]
    return sorted(near)[:_NEIGHBOURS]


def _evidence_parts(turn: TurnEvent) -> list[str]:
    parts = [turn.case.subject, turn.case.description, turn.query]
    if turn.case.product:
        parts.append(turn.case.product)
    if turn.case.environment:
        parts.append(turn.case.environment)
    parts.extend(m.content for m in turn.history)
    parts.extend(c.text for c in turn.contexts)
    return parts


def _evidence(turn: TurnEvent) -> str:
    return "\n".join(_evidence_parts(turn))


@lru_cache(maxsize=4096)
def _part_tokens(text: str) -> frozenset[str]:
    """Tokens of one piece of evidence; retrieved chunks recur across turns, so cached."""
    return frozenset(_tokens(text))


def _window(text: str, token: str) -> str:
    at = text.find(token)
    if at < 0:
        return token
    return text[max(0, at - _WINDOW) : at + len(token) + 1]


@lru_cache(maxsize=4096)
def _extract_window(window: str) -> tuple[Identifier, ...]:
    return extract(window)


def _identifiers_of(text: str, token: str) -> list[Identifier]:
    """The identifiers extracted from a window around ``token`` that overlap it."""
    return [i for i in _extract_window(_window(text, token)) if i.raw in token or token in i.raw]


def _url_host(token: str) -> str | None:
    m = re.match(r"[a-z][a-z0-9+.-]*://[^/?#]+", token, re.I)
    return m.group(0).lower() if m else None


def identifier_tripwire(turn: TurnEvent) -> TripwireHit:
    """Near misses of evidence identifiers in the answer of ``turn``."""
    candidates = _tokens(turn.answer)
    if not candidates:
        return _CLEAN
    parts = _evidence_parts(turn)
    evidence = "\n".join(parts)
    missing = [c for c in candidates if c not in evidence]
    if not missing:
        return _CLEAN
    pool = frozenset().union(*map(_part_tokens, parts))
    misses: dict[tuple[IdKind, str], NearMiss] = {}
    for token in sorted(missing):
        near = _near(token, pool)
        host = _url_host(token) if "://" in token else None
        if host is not None:
            urls = (w.rstrip(_TAIL) for w in evidence.split() if "://" in w)
            near += [e for e in urls if e != token and _url_host(e) == host]
        if not near:
            continue
        found = _identifiers_of(turn.answer, token)
        if not found:
            continue
        expected = [e for other in near for e in _identifiers_of(evidence, other)]
        for ident in found:
            if (ident.kind, ident.norm) in misses:
                continue
            miss = find_near_miss(ident, [e for e in expected if e.kind is ident.kind])
            if miss is not None:
                misses[(ident.kind, ident.norm)] = miss
    return TripwireHit(tuple(misses.values())) if misses else _CLEAN
