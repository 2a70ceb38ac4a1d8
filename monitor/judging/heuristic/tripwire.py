"""The identifier tripwire: a corrupted identifier in any consumed turn, cheaply, no network.

The daemon runs this on every turn it consumes, sampled or not, so it has to cost a few
microseconds on a clean turn. It applies the judge's own near-miss rules
(``identifiers.find_near_miss``) but only where a corruption can be:

1. the answer's identifier-like tokens (anything with a digit, ``_``, ``.``, ``/``, ``:``,
   ``@`` or an inner ``-``, and ``UPPER_CASE`` words) that do not occur verbatim in the case,
   history, query or contexts: a copied identifier is a substring of its source, so a clean
   answer stops here after one split, a dictionary look-up per word and a few substring
   searches;
2. for each of those, the evidence's identifier-like tokens within two edits of it (OSA
   distance, rapidfuzz, in C) or, for a URL, the evidence URLs on the same host;
3. for each such pair, both tokens are classified with ``identifiers.extract`` on a short
   window of their text (so "port 578" is a port, "4.12" after "version" a version) and
   compared kind by kind.

Redaction placeholders (``<CARD_1>``, ``monitor.redaction``) are identifiers compared by kind:
an answer placeholder absent from the evidence while the evidence has one of the same kind is
a mismatch (the answer gives another card than the customer's), whatever their spelling.

It sees less than the judge: a near miss it finds is one the judge finds too, but it does not
compare whole commands (a mistyped plain word inside one), and an identifier that is only
recognised from a wider context is missed. No state but bounded caches (answer words, evidence
parts), which change what it costs, never what it finds.

Its work per turn is bounded whatever the turn (decode admits up to ``max_message_bytes``):
the first 64 KiB of the answer, substring searches up to ~32 M characters, the near search for
the first 32 missing tokens over the first 256 KiB of evidence. A turn past a bound is checked
as far as the bound and marked ``truncated`` (counted, so it is never silent).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from operator import attrgetter, itemgetter

from rapidfuzz import process
from rapidfuzz.distance import OSA

from monitor.judging.heuristic.identifiers import NearMiss, extract, find_near_miss
from monitor.judging.heuristic.kinds import Identifier, IdKind
from monitor.redaction.placeholders import PLACEHOLDER
from monitor.schema.turn import TurnEvent

__all__ = ["TripwireHit", "identifier_tripwire"]

# Characters that make a token look like an identifier (besides an inner hyphen, UPPER_CASE).
_ID_CHARS = frozenset("0123456789_/@.:")
_STRIP = "`'\"()[]<>,;!?*"
_TAIL = ".:"
_MAX_EDITS = 2
_NEIGHBOURS = 3
_WINDOW = 32
_MIN_LEN = 3
# Caches: evidence parts up to 16 KiB (chunks, history), answer words, neighbours per part.
_PARTS_CACHED = 1024
_MAX_CACHED_CHARS = 16 * 1024
_WORDS_REMEMBERED = 1 << 16
_MAX_REMEMBERED_WORD = 200
_NEAR_REMEMBERED = 256
# Bounds on one turn's work (see the module docstring); far above any real turn.
_MAX_ANSWER_CHARS = 64 * 1024
_MAX_SCANNED_CHARS = 1 << 25
_MAX_NEAR_SEARCHES = 32
_MAX_POOL_CHARS = 256 * 1024


@dataclass(frozen=True, slots=True)
class TripwireHit:
    """The near misses found in a turn (empty: nothing tripped)."""

    misses: tuple[NearMiss, ...]
    truncated: bool = False  # the turn was larger than the tripwire checks (module docstring)

    @property
    def kinds(self) -> tuple[str, ...]:
        """Each kind once, for bounded metric labels."""
        if not self.misses:
            return ()
        return tuple(sorted({m.found.kind.value for m in self.misses}))

    def __bool__(self) -> bool:
        return bool(self.misses)


_CLEAN = TripwireHit(())
_CLEAN_TRUNCATED = TripwireHit((), truncated=True)


def _is_identifier(token: str) -> bool:
    if len(token) < _MIN_LEN:
        return False
    if not _ID_CHARS.isdisjoint(token):
        return True
    return "-" in token[1:-1] or (token.isupper() and token.isalnum())


def _word_tokens(words: Iterable[str]) -> set[str]:
    """The identifier-like tokens of whitespace-separated words."""
    isdisjoint = _ID_CHARS.isdisjoint
    found: set[str] = set()
    for word in words:
        # A first cut with C-level string methods; the exact test only on what is left.
        if isdisjoint(word) and "-" not in word and not word.isupper():
            continue
        for part in word.split("=") if "=" in word else (word,):
            token = part.strip(_STRIP).rstrip(_TAIL).strip(_STRIP)
            if _is_identifier(token):
                found.add(token)
    return found


def _tokens(text: str) -> set[str]:
    """The identifier-like tokens of a text."""
    return _word_tokens(set(text.split()))


_NO_TOKENS: frozenset[str] = frozenset()


class _WordTokens(dict[str, frozenset[str]]):
    """word -> its identifier-like tokens (mostly none), filled on first sight.

    Answers are written in a recurring vocabulary, so a word is looked up in C instead of
    tested in Python (three times the cost). Frozensets, so that one C-level ``union`` merges
    a whole answer's look-ups. Bounded: cleared when full, a changed vocabulary refills it.
    """

    def __missing__(self, word: str) -> frozenset[str]:
        found = frozenset(_word_tokens((word,))) or _NO_TOKENS
        if len(word) <= _MAX_REMEMBERED_WORD:
            if len(self) >= _WORDS_REMEMBERED:
                self.clear()
            self[word] = found
        return found


_word_lookup = _WordTokens().__getitem__


def _answer_tokens(text: str) -> frozenset[str]:
    return _NO_TOKENS.union(*map(_word_lookup, text.split()))


class _Part(dict[str, tuple[str, ...]]):
    """One piece of evidence, indexed for the near search on first use.

    Retrieved chunks (and the history of a conversation) recur across turns, so parts are
    cached: their identifier-like tokens by length (two edits change the length by two at
    most, so only five buckets are compared) and, as the dict itself, the neighbours already
    found among them (token -> neighbours), so a repeated search is a subscript in C.
    """

    __slots__ = ("_by_length",)

    def __init__(self, text: str) -> None:
        super().__init__()
        self._by_length: dict[int, list[str]] = {}
        for w in sorted(_tokens(text)):
            self._by_length.setdefault(len(w), []).append(w)

    def __missing__(self, token: str) -> tuple[str, ...]:
        """This part's tokens within two edits of ``token`` (OSA distance, in C), first three."""
        n = len(token)
        by_length = self._by_length
        pool = [w for k in range(n - _MAX_EDITS, n + _MAX_EDITS + 1) for w in by_length.get(k, ())]
        close = (
            process.extract(token, pool, scorer=OSA.distance, score_cutoff=_MAX_EDITS, limit=None)
            if pool
            else []
        )
        found = tuple(sorted(w for w, _, _ in close if w != token)[:_NEIGHBOURS])
        if len(self) >= _NEAR_REMEMBERED:
            self.clear()
        self[token] = found
        return found


@lru_cache(maxsize=_PARTS_CACHED)
def _cached_part(text: str) -> _Part:
    return _Part(text)


def _part(text: str) -> _Part:
    return _cached_part(text) if len(text) <= _MAX_CACHED_CHARS else _Part(text)


def _near(token: str, parts: list[_Part]) -> list[str]:
    """Evidence identifiers within two edits of ``token``, the first three in sorted order."""
    # One C-level union over the parts' look-ups (a comprehension is a Python call of its
    # own, and most searches find nothing).
    found = _NO_TOKENS.union(*map(itemgetter(token), parts))
    return sorted(found)[:_NEIGHBOURS] if found else []


_content = attrgetter("content")
_text = attrgetter("text")


def _same_kind_placeholders(kind: str, evidence: str) -> list[str]:
    """The evidence's redaction placeholders of ``kind``, without brackets (as tokens are)."""
    if "<" not in evidence:
        return []
    found = {m.group()[1:-1] for m in PLACEHOLDER.finditer(evidence) if m.group(1) == kind}
    return sorted(found)[:_NEIGHBOURS]


def _evidence_parts(turn: TurnEvent) -> list[str]:
    case = turn.case
    parts = [case.subject, case.description, turn.query]
    if case.product:
        parts.append(case.product)
    if case.environment:
        parts.append(case.environment)
    parts += map(_content, turn.history)
    parts += map(_text, turn.contexts)
    return parts


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


def _head(text: str, limit: int) -> str:
    """``text`` up to ``limit`` characters, cut at a space so that no word is cut short."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    cut = max(head.rfind(" "), head.rfind("\n"))
    return head[:cut] if cut > 0 else head


def _pool_parts(texts: list[str]) -> list[_Part]:
    """The parts of an evidence larger than the near search's bound, up to the bound."""
    parts: list[_Part] = []
    pooled = 0
    for text in texts:
        head = _head(text, _MAX_POOL_CHARS - pooled)
        if head:
            parts.append(_part(head))
            pooled += len(head)
        if len(head) < len(text):
            break
    return parts


def identifier_tripwire(turn: TurnEvent) -> TripwireHit:
    """Near misses of evidence identifiers in the answer of ``turn``."""
    answer = turn.answer
    truncated = len(answer) > _MAX_ANSWER_CHARS
    candidates = _answer_tokens(_head(answer, _MAX_ANSWER_CHARS) if truncated else answer)
    if not candidates:
        return _CLEAN_TRUNCATED if truncated else _CLEAN
    texts = _evidence_parts(turn)
    evidence = "\n".join(texts)
    if len(candidates) * len(evidence) > _MAX_SCANNED_CHARS:
        truncated = True
        candidates = frozenset(sorted(candidates)[: max(1, _MAX_SCANNED_CHARS // len(evidence))])
    missing = [c for c in candidates if c not in evidence]
    if not missing:
        return _CLEAN_TRUNCATED if truncated else _CLEAN
    missing.sort()
    if len(missing) > _MAX_NEAR_SEARCHES:
        truncated = True
        del missing[_MAX_NEAR_SEARCHES:]
    if len(evidence) <= _MAX_CACHED_CHARS:
        # Every part is small enough to cache: the look-ups run in C, without _part's test.
        parts = list(map(_cached_part, texts))
    elif len(evidence) <= _MAX_POOL_CHARS:
        parts = list(map(_part, texts))
    else:
        truncated = True
        parts = _pool_parts(texts)
    misses: dict[tuple[IdKind, str], NearMiss] = {}
    for token in missing:
        # What a placeholder must have (a capital first, an underscore, an alphanumeric
        # last) before the pattern is tried: most tokens are no placeholder.
        maybe_placeholder = "A" <= token[0] <= "Z" and "_" in token and token[-1].isalnum()
        placeholder = PLACEHOLDER.fullmatch(f"<{token}>") if maybe_placeholder else None
        if placeholder is not None:  # compared by kind: keyed ones are far apart as strings
            near = _same_kind_placeholders(placeholder.group(1), evidence)
        else:
            near = _near(token, parts)
        host = _url_host(token) if "://" in token else None
        if host is not None:
            urls = (w.rstrip(_TAIL) for w in evidence.split() if "://" in w)
            near += [e for e in urls if e != token and _url_host(e) == host]
        if not near:
            continue
        found = _identifiers_of(answer, token)
        if not found:
            continue
        expected = [e for other in near for e in _identifiers_of(evidence, other)]
        for ident in found:
            if (ident.kind, ident.norm) in misses:
                continue
            miss = find_near_miss(ident, [e for e in expected if e.kind is ident.kind])
            if miss is not None:
                misses[(ident.kind, ident.norm)] = miss
    if misses:
        return TripwireHit(tuple(misses.values()), truncated)
    return _CLEAN_TRUNCATED if truncated else _CLEAN
