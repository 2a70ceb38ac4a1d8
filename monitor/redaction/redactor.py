"""Pseudonymize a turn: every detected value becomes a placeholder, consistently.

One ``Pseudonymizer`` serves the whole turn, so the same value in the case, the history, the
query, the contexts, the answer and the reference becomes the same placeholder, and a judge (or
the identifier tripwire) can still tell that the answer repeats the customer's account number,
or gives a different one. Fields are visited in that order, so numbering follows first
appearance in the conversation.

A checksum decides whether a digit run is a card or an IBAN, so a mistyped copy of the
customer's card (one digit off: no longer Luhn-valid) would pass as plain digits and leak all
but one of them. Within a turn, a card- or IBAN-shaped run within two edits of a detected card
or IBAN is therefore redacted too, as a different value of that kind: the judges and the
tripwire then see that the answer gives another card than the customer's.

Overlaps are settled by kind: a secret beats an e-mail, an e-mail an IBAN, an IBAN a card, a
card an operator pattern, which beats a phone, an IP and a hostname (a card's digits are never
half a phone number).

A turn's text is bounded (``max_chars``, summed over its fields): a larger one raises
``TooLargeToRedact`` and is never passed on unredacted. Pure: no I/O.

What to look for is the ``RedactionPolicy`` (``monitor.redaction.policy``); which texts of a
turn are visited, and the turn rebuilt from them, ``monitor.redaction.turn_texts``; this module
is the engine between: the detectors in priority order, overlaps, near copies, placeholders,
and the memory of texts already scanned.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from itertools import accumulate, filterfalse
from types import MappingProxyType
from typing import NamedTuple

from rapidfuzz.distance import OSA

import monitor.redaction.detectors as detectors
from monitor.errors import TooLargeToRedact
from monitor.redaction.detectors import Finding
from monitor.redaction.placeholders import Pseudonymizer
from monitor.redaction.policy import RedactionPolicy
from monitor.redaction.turn_texts import replaced
from monitor.redaction.turn_texts import texts as _texts
from monitor.schema.turn import TurnEvent

__all__ = [
    "NONE_REPLACED",
    "Redactor",
    "TooLargeToRedact",
    "TurnRedaction",
]


Detector = Callable[[str], Iterable[Finding]]


class TurnRedaction(NamedTuple):
    """The turn to pass on, and the values replaced in it per kind (label -> occurrences).

    A NamedTuple, and one shared empty ``counts`` for a turn with nothing to replace: built for
    every consumed turn, and a dataclass with a dict of its own cost more than the look-ups
    that tell a turn clean (bench/README.md, "Ingest per turn, fifth pass")."""

    turn: TurnEvent
    counts: Mapping[str, int]


NONE_REPLACED: Mapping[str, int] = MappingProxyType({})


class Redactor:
    """The policy's detectors, in overlap priority order. One thread at a time: it remembers
    the texts it found clean (each pipeline, batch run and screening process has its own)."""

    def __init__(self, policy: RedactionPolicy) -> None:
        self.policy = policy
        found: list[tuple[str, Detector]] = []
        # Operator patterns may match across lines: they run on each text alone. The built-in
        # detectors never cross a line break, so they run once over the turn's texts joined.
        self._per_text: set[str] = set()
        # Texts found clean (no finding), e.g. knowledge-base passages retrieved again and
        # again: not scanned twice. Only clean texts, so no personal data is kept here.
        self._clean: dict[str, None] = {}
        # Passages with findings (a KB article quoting a support address): where and what, by
        # a digest of the text; the values are read again from the text of the turn at hand,
        # so neither the text nor a value is kept here either.
        self._found: dict[bytes, tuple[tuple[int, int, str, str], ...]] = {}
        if policy.secrets:
            found.append(("secret", detectors.secrets))
        if policy.emails:
            found.append(("email", detectors.emails))
        if policy.ibans:
            found.append(("iban", detectors.ibans))
        if policy.cards:
            found.append(("card", detectors.cards))
        for name, pattern in policy.patterns.items():
            found.append((name, partial(detectors.custom, kind=name.upper(), pattern=pattern)))
            self._per_text.add(name)
        if policy.phones:
            found.append(("phone", partial(detectors.phones, region=policy.phone_region)))
        if policy.ips:
            found.append(("ip", detectors.ips))
        if policy.hostnames:
            found.append(("host", detectors.hostnames))
        self._detectors = tuple(found)

    # ------------------------------------------------------------ text

    def spans(self, text: str) -> list[tuple[Finding, str]]:
        """Non-overlapping findings with their kind labels, in text order."""
        return self.spans_of([text]).get(text, [])

    def spans_of(self, texts: Iterable[str]) -> dict[str, list[tuple[Finding, str]]]:
        """``spans`` of each distinct non-empty text, the built-in detectors run once over
        all of them joined (a call per text and detector costs more than the scan)."""
        out: dict[str, list[tuple[Finding, str]]] = {}
        todo: list[str] = []
        digests: dict[str, bytes] = {}
        for text in texts:
            if not text or text in out:
                continue
            out[text] = []
            if text in self._clean:
                continue
            if _FOUND_MIN_CHARS <= len(text) <= _CLEAN_MAX_CHARS:
                digest = _digest(text)
                known = self._found.get(digest)
                if known is not None:
                    out[text] = [
                        (Finding(a, b, kind, self._normalise(kind, text[a:b])), label)
                        for a, b, kind, label in known
                    ]
                    continue
                digests[text] = digest
            todo.append(text)
        if not todo:
            return out
        offsets = list(accumulate((len(t) + len(_SEP) for t in todo[:-1]), initial=0))
        joined = _SEP.join(todo) if len(todo) > 1 else todo[0]
        kept: list[list[tuple[Finding, str]]] = [[] for _ in todo]
        starts: list[list[int]] = [[] for _ in todo]
        for label, detect in self._detectors:
            if label in self._per_text:
                for i, text in enumerate(todo):
                    _keep(kept[i], starts[i], label, detect(text))
                continue
            per_text: list[list[Finding]] = [[] for _ in todo]
            for f in detect(joined):
                i = bisect_right(offsets, f.start) - 1
                at = offsets[i]
                if f.end - at <= len(todo[i]):  # never across texts (the separator stops all)
                    per_text[i].append(f._replace(start=f.start - at, end=f.end - at))
            for i, findings in enumerate(per_text):
                if findings:
                    _keep(kept[i], starts[i], label, findings)
        for text, spans in zip(todo, kept, strict=True):
            out[text] = spans
            if not spans and len(text) <= _CLEAN_MAX_CHARS:
                if len(self._clean) >= _CLEAN_REMEMBERED:
                    del self._clean[next(iter(self._clean))]  # the oldest
                self._clean[text] = None
            elif spans and text in digests:
                if len(self._found) >= _CLEAN_REMEMBERED:
                    del self._found[next(iter(self._found))]
                self._found[digests[text]] = tuple(
                    (f.start, f.end, f.kind, label) for f, label in spans
                )
        return out

    def _normalise(self, kind: str, raw: str) -> str:
        """What a detector of ``kind`` gives as the normalised form of ``raw``."""
        if kind == "EMAIL" or kind == "HOST":
            return raw.lower()
        if kind == "CARD":
            return raw.replace(" ", "").replace("-", "")
        if kind == "IBAN":
            return detectors.iban_compact(raw)
        if kind == "PHONE":
            return detectors.phone_e164(raw, self.policy.phone_region)
        if kind == "IP":
            return detectors.ip_compressed(raw)
        return raw  # secrets and operator kinds: the value as written

    def _with_near_copies(
        self, text: str, found: list[tuple[Finding, str]], known: Mapping[str, set[str]]
    ) -> list[tuple[Finding, str]]:
        """``found`` plus the near copies in ``text`` of the turn's checksummed values."""
        extra = [
            f
            for kind, label, shaped in _NEAR_COPIED
            if known.get(kind)
            for f in shaped(text)
            if f.normalised not in known[kind] and _near_any(f.normalised, known[kind])
        ]
        if not extra:
            return found
        kept = list(found)
        starts = [f.start for f, _ in kept]
        for kind, label, _ in _NEAR_COPIED:
            _keep(kept, starts, label, (f for f in extra if f.kind == kind))
        return kept

    def _render(
        self,
        text: str,
        found: list[tuple[Finding, str]],
        names: Pseudonymizer,
        counts: dict[str, int] | None,
    ) -> str:
        if not found:
            return text
        out: list[str] = []
        at = 0
        for f, label in found:
            out.append(text[at : f.start])
            out.append(names.placeholder(f.kind, f.normalised))
            at = f.end
            if counts is not None:
                counts[label] = counts.get(label, 0) + 1
        out.append(text[at:])
        return "".join(out)

    def redact_text(
        self, text: str, names: Pseudonymizer, counts: dict[str, int] | None = None
    ) -> str:
        """Redact one text on its own (near copies: of values found in this text)."""
        found = self.spans(text)
        found = self._with_near_copies(text, found, _checksummed([found]))
        return self._render(text, found, names, counts)

    def redact_loose(self, text: str, counts: dict[str, int] | None = None) -> str:
        """Redact one free-standing text (a dead-letter record) within the bound."""
        if len(text) > self.policy.max_chars:
            raise TooLargeToRedact(len(text), self.policy.max_chars)
        return self.redact_text(text, Pseudonymizer(self.policy.key), counts)

    # ------------------------------------------------------------ turn

    def check_size(self, turn: TurnEvent) -> None:
        """Raise ``TooLargeToRedact`` if the turn's text exceeds the bound."""
        self._check_size(_texts(turn))

    def _check_size(self, texts: list[str]) -> None:
        size = sum(map(len, texts))
        if size > self.policy.max_chars:
            raise TooLargeToRedact(size, self.policy.max_chars)

    def redact_turn(self, turn: TurnEvent) -> TurnRedaction:
        # The turn's texts are gathered once, for the bound and for the scan.
        texts = _texts(turn)
        size = sum(map(len, texts))
        if size > self.policy.max_chars:
            raise TooLargeToRedact(size, self.policy.max_chars)
        # A turn whose every text was found clean before (a replayed turn, or one whose
        # query and answer recur too) has nothing to replace: told by one look-up per text,
        # in C, without ``spans_of``'s bookkeeping (an empty text is clean). Otherwise the
        # look-ups stop at the first text not known clean.
        if not any(filterfalse(self._clean.__contains__, texts)):
            return TurnRedaction(turn, NONE_REPLACED)
        # Two passes: what each text holds, then near copies of the turn's cards and IBANs.
        spans = self.spans_of(texts)
        if not any(spans.values()):
            return TurnRedaction(turn, NONE_REPLACED)  # nothing to replace: no copy to make
        counts: dict[str, int] = {}
        names = Pseudonymizer(self.policy.key)
        known = _checksummed(spans.values())

        def red(text: str) -> str:
            found = spans.get(text)
            if found is None:  # pragma: no cover - every text was visited above
                found = self.spans(text)
            found = self._with_near_copies(text, found, known)
            return self._render(text, found, names, counts)

        # A model none of whose texts changed is kept, not copied (turn_texts.replaced).
        return TurnRedaction(replaced(turn, red), counts)


# Kinds found by checksum whose near copies are redacted too: (kind, label, shape detector).
_NEAR_COPIED: tuple[tuple[str, str, Detector], ...] = (
    ("CARD", "card", detectors.card_shaped),
    ("IBAN", "iban", detectors.iban_shaped),
)
_NEAR_EDITS = 2
# Joins a turn's texts for one scan: no built-in pattern matches a line break or a NUL.
_SEP = "\n\x00\n"
_CLEAN_REMEMBERED = 4096
_CLEAN_MAX_CHARS = 16 * 1024
_FOUND_MIN_CHARS = 128  # shorter texts are rescanned: a digest would cost about as much


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _keep(
    kept: list[tuple[Finding, str]], starts: list[int], label: str, found: Iterable[Finding]
) -> None:
    """Add each finding that overlaps none already kept (``kept`` sorted by start)."""
    for f in found:
        i = bisect_left(starts, f.start)
        if i > 0 and kept[i - 1][0].end > f.start:
            continue
        if i < len(kept) and kept[i][0].start < f.end:
            continue
        starts.insert(i, f.start)
        kept.insert(i, (f, label))


def _checksummed(found: Iterable[list[tuple[Finding, str]]]) -> dict[str, set[str]]:
    known: dict[str, set[str]] = {}
    for spans in found:
        for f, _ in spans:
            if f.kind in ("CARD", "IBAN"):
                known.setdefault(f.kind, set()).add(f.normalised)
    return known


def _near_any(value: str, known: set[str]) -> bool:
    return any(OSA.distance(value, k, score_cutoff=_NEAR_EDITS) <= _NEAR_EDITS for k in known)
