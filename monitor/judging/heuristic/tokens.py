"""Identifiers beyond codes, versions, commands and paths: keys, URLs, hosts, names, ports, ids.

Support answers fail most expensively on the tokens an operator copies: a configuration key
(``idle_in_transaction_session_timeout``, ``FOUNDRY_CACHE_DIR``, ``build.max_context_gb``,
``nginx.ingress.kubernetes.io/proxy-body-size``), a URL and its path, a hostname, a resource
name (``vol-data-4417``), a ``--flag``, a port, an account id or a key tag. This module finds
them in free text (prose, backticks and code alike), normalises them, and decides whether one
is a near miss of another of the same kind: an edit of one or two characters, two swapped
characters or digits, two swapped path or key segments.

Placeholders in the evidence (``<volume>``, ``{customer_id}``, ``$TENANT``) are templates: a
URL or command that fills them in is the evidence's URL or command, not a new one.

Pure functions and precompiled patterns only: no I/O, no state, safe from any thread.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Protocol, TypeVar

from rapidfuzz.distance import OSA

from monitor.judging.heuristic.kinds import IdKind
from monitor.redaction.placeholders import PLACEHOLDER_BODY

__all__ = [
    "TEXT_CACHE_SIZE",
    "TOKEN_KINDS",
    "extract_tokens",
    "fills_template",
    "forget_readings",
    "may_contain",
    "near_token",
    "normalise_token",
    "remembered",
]

TOKEN_KINDS = frozenset(
    {
        IdKind.CONFIG_KEY,
        IdKind.URL,
        IdKind.HOSTNAME,
        IdKind.RESOURCE,
        IdKind.FLAG,
        IdKind.PORT,
        IdKind.ID,
        IdKind.NUMBER,
    }
)

# How many texts' readings the heuristic judge remembers (per kind of reading): a case, a
# knowledge-base chunk or an earlier message comes back turn after turn. Twelve kinds of
# reading at about 0.7 kB each (on the example turns) plus the texts: ~10 MB when all are full.
TEXT_CACHE_SIZE = 1024


class _Remembered(Protocol):
    def cache_clear(self) -> None: ...


_R = TypeVar("_R", bound=_Remembered)
_REMEMBERED: list[_Remembered] = []


def remembered(reading: _R) -> _R:
    """Register a text reading's ``lru_cache`` with ``forget_readings``."""
    _REMEMBERED.append(reading)
    return reading


def forget_readings() -> None:
    """Forget every text reading the heuristic judge remembers (a benchmark's cold start)."""
    for reading in _REMEMBERED:
        reading.cache_clear()


# ---------------------------------------------------------------- patterns

_PLACEHOLDER = r"(?:<[^\s<>]{1,40}>|\{[^\s{}]{1,40}\})"
_URL = re.compile(rf"\b[a-z][a-z0-9+.-]{{1,15}}://(?:[^\s<>\"'`{{}}]|{_PLACEHOLDER})+", re.I)
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\b")
# domain/key: Kubernetes annotations and labels, Java-style property paths with a domain.
_DOMAIN_KEY = re.compile(r"(?<![\w./-])[a-z0-9-]+(?:\.[a-z0-9-]+)+/[a-z0-9][a-z0-9._-]*[a-z0-9]")
_FILE_EXT = (
    "pem|crt|cer|key|p12|pfx|yml|yaml|json|env|conf|cfg|ini|toml|properties|log|txt|csv|xml"
    "|sh|ps1|py|js|ts|sql|zip|gz|tgz|tar|jar|war|exe|msi|dll|lock|pid|sock|service|html"
)
_FILE = re.compile(rf"(?<![\w/.\\-])[A-Za-z0-9_][\w-]*(?:\.[\w-]+)*\.(?:{_FILE_EXT})(?![\w-]|\.\w)")
_TLD_TEXT = (
    "com org net io dev app example internal local lan corp cloud co uk de eu fr nl ch at se"
    " svc cluster test invalid localhost arpa info biz us ca au jp in intra home"
)
_TLDS = frozenset(_TLD_TEXT.split())
_HOST = re.compile(
    r"(?<![\w@/.:-])((?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]*[a-z0-9])"
    r"(?::(\d{2,5}))?(?![\w-]|\.\w)"
)
_IPV4 = re.compile(r"(?<![\w.])((?:\d{1,3}\.){3}\d{1,3})(?:/(\d{1,2}))?(?::(\d{2,5}))?(?![\w.])")
_PORT_PHRASE = re.compile(
    r"\b(?:ports?|tcp|udp)\s+(\d{2,5})(?:\s*(?:and|or|,)\s*(\d{2,5}))?\b", re.I
)
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
# Keys: dotted with a snake or camel segment, snake_case, UPPER_CASE, camelCase.
_DOTTED_KEY = re.compile(
    r"(?<![\w.$/-])[a-z][a-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?![\w-]|\.\w|\()"
)
_SNAKE = re.compile(r"(?<![\w.$/-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w-])")
_UPPER = re.compile(r"(?<![\w.$/-])[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+(?![\w-])")
_CAMEL = re.compile(r"(?<![\w.$/-])[a-z]+[0-9]*(?:[A-Z][a-z0-9]+)+(?![\w-])")
_MIXED_ID = re.compile(r"(?<![\w-])[A-Za-z]+_[A-Za-z0-9]*\d[A-Za-z0-9]*(?![\w-])")
_RESOURCE = re.compile(r"(?<![\w./@:\\-])[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?![\w]|-\w|\.\w)")
_NUMBER = re.compile(r"(?<![\w.:/,-])\d{4,12}(?![\w:/-]|[.,]\d)")
# What a pattern needs, found with a fast scan (each starts with a literal): a text without it
# skips the pattern's slow scan. Where the pattern scans the text with earlier finds blanked
# out and the scan for what it needs reads the text as it came, what it needs holds no space,
# so it is in the text wherever it is in the blanked one.
_FOUR_DIGITS = re.compile(r"\d{4}")
_DOT_EXT = re.compile(rf"\.(?:{_FILE_EXT})")
_DOT_LOWER = re.compile(r"\.[a-z]")
_DOTTED_QUAD = re.compile(r"\.\d{1,3}\.\d{1,3}\.\d")  # three of an IPv4 address's dots
_DOT_KEY = re.compile(r"\.[A-Za-z_]")
_HYPHEN_ALNUM = re.compile(r"-[a-z0-9]")
_HEX_GROUP = re.compile(r"-[0-9a-fA-F]{4}-")
_CAMEL_HUMP = re.compile(r"[A-Z](?<=[a-z0-9][A-Z])[a-z0-9]")
_SLASH_KEY = re.compile(r"/(?<=[a-z0-9-]/)[a-z0-9]")  # the slash of a domain/key
# Prefixes of UPPER_CASE tokens that are error codes (the error-code extractor has them).
_CODE_PREFIXES = ("ERR_", "ERROR_", "E_", "STATUS_", "NT_STATUS_", "WSA_")
_TRAILING = ".,;:)]!?'\""


def _mask(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    chars = list(text)
    for start, end in spans:
        chars[start:end] = " " * (end - start)
    return "".join(chars)


class _Masked:
    """The text with every span found so far blanked out, blanking only the spans added since
    the last look (blanking is idempotent, so this equals ``_mask(text, spans)``)."""

    __slots__ = ("_done", "_spans", "text")

    def __init__(self, text: str, spans: list[tuple[int, int]]) -> None:
        self.text = text
        self._spans = spans
        self._done = 0

    def current(self) -> str:
        new = self._spans[self._done :]
        self._done = len(self._spans)
        if new:
            self.text = _mask(self.text, new)
        return self.text


def may_contain(text: str, *words: str) -> bool:
    """Whether a case-insensitive pattern that needs one of ``words`` (lower-case ASCII) may
    match the text: False only when none of them occurs in any case. Non-ASCII text always may
    (``re.IGNORECASE`` matches "ı" for "i" and "ſ" for "s", which lower-casing does not)."""
    if not text.isascii():
        return True
    lower = text.lower()
    return any(w in lower for w in words)


def _is_hostname(name: str) -> bool:
    labels = name.split(".")
    if not any(c.isalpha() for c in name):
        return False
    tld = labels[-1]
    return tld in _TLDS or (len(labels) >= 3 and len(tld) >= 2)


def _tokens(text: str) -> Iterator[tuple[int, IdKind, str]]:
    """(position, kind, raw) of every token identifier, most specific kinds first.

    Each pass blanks what it found, so a URL's host is not also a hostname and a file name is
    not also a resource name; ports are reported beside the URL or host they belong to.

    A pass whose pattern needs a character the text lacks (``://`` for a URL, ``_`` for a
    snake_case key) is skipped: it could match nothing, and a pass costs a scan of the text.
    """
    spans: list[tuple[int, int]] = []
    blank = _Masked(text, spans)
    dotted = "." in text
    resource = "-" in text and _HYPHEN_ALNUM.search(text) is not None
    underscore = "_" in text
    if "://" in text:
        for m in _URL.finditer(text):
            raw = m.group(0).rstrip(_TRAILING)
            spans.append((m.start(), m.start() + len(raw)))
            yield m.start(), IdKind.URL, raw
            port = re.match(r"[^:/]+://[^/:?#]+:(\d{2,5})\b", raw)
            if port:
                yield m.start(), IdKind.PORT, port.group(1)
            host = re.match(r"[^:/]+://([^/:?#<>{}]+)", raw)
            if host and _is_hostname(host.group(1).lower()):
                yield m.start(), IdKind.HOSTNAME, host.group(1)
    for pattern, kind, needed in (
        (_EMAIL, IdKind.ID, "@" in text),
        (_UUID, IdKind.ID, "-" in text and _HEX_GROUP.search(text) is not None),
        (_DOMAIN_KEY, IdKind.CONFIG_KEY, dotted and _SLASH_KEY.search(text) is not None),
    ):
        if not needed:
            continue
        masked = blank.current()
        for m in pattern.finditer(masked):
            spans.append(m.span())
            yield m.start(), kind, m.group(0)
    if dotted:
        masked = blank.current()
        for m in _FILE.finditer(masked) if _DOT_EXT.search(text) else ():
            spans.append(m.span())
            yield m.start(), IdKind.PATH, m.group(0)
        masked = blank.current()
        for m in _HOST.finditer(masked) if _DOT_LOWER.search(masked) else ():
            if _is_hostname(m.group(1)):
                spans.append(m.span())
                yield m.start(), IdKind.HOSTNAME, m.group(1)
                if m.group(2):
                    yield m.start(2), IdKind.PORT, m.group(2)
        for m in _IPV4.finditer(masked) if _DOTTED_QUAD.search(masked) else ():
            if all(int(p) <= 255 for p in m.group(1).split(".")):
                spans.append(m.span())
                yield m.start(), IdKind.HOSTNAME, m.group(1)
                if m.group(3):
                    yield m.start(3), IdKind.PORT, m.group(3)
    else:
        masked = blank.current()
    if may_contain(text, "port", "tcp", "udp"):
        for m in _PORT_PHRASE.finditer(masked):
            for group in (1, 2):
                if m.group(group):
                    spans.append(m.span(group))
                    yield m.start(group), IdKind.PORT, m.group(group)
    if "--" in text:
        masked = blank.current()
        for m in _FLAG.finditer(masked):
            spans.append(m.span())
            yield m.start(), IdKind.FLAG, m.group(0)
    if dotted and _DOT_KEY.search(text):
        masked = blank.current()
        for m in _DOTTED_KEY.finditer(masked) if _DOT_KEY.search(masked) else ():
            if any(c == "_" or c.isupper() for c in m.group(0)):
                spans.append(m.span())
                yield m.start(), IdKind.CONFIG_KEY, m.group(0)
    if underscore:
        masked = blank.current()
        for m in _MIXED_ID.finditer(masked):
            if not m.group(0).isupper() and not m.group(0).islower():
                spans.append(m.span())
                yield m.start(), IdKind.ID, m.group(0)
    masked = blank.current()
    # camelCase needs an upper-case letter right after a lower-case letter or a digit, and a
    # lower-case letter or a digit after it.
    for pattern, needed in ((_SNAKE, underscore), (_CAMEL, _CAMEL_HUMP.search(text) is not None)):
        if needed:
            for m in pattern.finditer(masked):
                spans.append(m.span())
                yield m.start(), IdKind.CONFIG_KEY, m.group(0)
    if underscore:
        for m in _UPPER.finditer(masked):
            if not m.group(0).startswith(_CODE_PREFIXES):
                spans.append(m.span())
                yield m.start(), IdKind.CONFIG_KEY, m.group(0)
    masked = blank.current()
    if resource:
        for m in _RESOURCE.finditer(masked):
            yield m.start(), IdKind.RESOURCE, m.group(0)
    if _FOUR_DIGITS.search(text):
        for m in _NUMBER.finditer(masked):
            yield m.start(), IdKind.NUMBER, m.group(0)


def extract_tokens(text: str) -> list[tuple[int, IdKind, str]]:
    """(position, kind, raw) of the token identifiers of a text, in order of appearance."""
    return sorted(_tokens(text), key=lambda item: item[0])


# ---------------------------------------------------------------- normalisation


def normalise_token(kind: IdKind, raw: str) -> str:
    """Comparison form: case folded where case carries no meaning, trailing punctuation off."""
    text = raw.strip().rstrip(_TRAILING)
    if kind is IdKind.URL:
        m = re.match(r"([^:/]+://)([^/?#]*)(.*)$", text)
        if m is None:
            return text
        return m.group(1).lower() + m.group(2).lower() + (m.group(3).rstrip("/") or "")
    if kind in (IdKind.HOSTNAME, IdKind.FLAG, IdKind.RESOURCE):
        return text.lower().rstrip(".")
    if kind is IdKind.ID and "@" in text:
        return text.lower()
    if kind in (IdKind.PORT, IdKind.NUMBER):
        return text.lstrip("0") or "0"
    return text


# ---------------------------------------------------------------- templates


@lru_cache(maxsize=4096)
def _template(evidence: str) -> re.Pattern[str] | None:
    # A redaction placeholder (<EMAIL_1>) stands for one value: a literal, not a slot.
    parts = re.split(
        r"(<(?!" + PLACEHOLDER_BODY + r">)[^\s<>]{1,40}>"
        r"|\{[^\s{}]{1,40}\}|\$\{?[A-Z][A-Z0-9_]*\}?|…|\.\.\.)",
        evidence,
    )
    if len(parts) == 1:
        return None
    pattern = "".join(re.escape(p) if i % 2 == 0 else r"[^\s/'\"`]+?" for i, p in enumerate(parts))
    return re.compile(pattern)


def fills_template(found: str, evidence: str) -> bool:
    """``found`` is ``evidence`` with its placeholders filled in (``--volume <volume>``)."""
    template = _template(evidence)
    return template is not None and template.fullmatch(found) is not None


# ---------------------------------------------------------------- near misses


def _is_placeholder(segment: str) -> bool:
    return bool(re.fullmatch(_PLACEHOLDER, segment))


def _same(x: str, y: str) -> bool:
    return x == y or _is_placeholder(x) or _is_placeholder(y)


def _swapped(a: list[str], b: list[str]) -> bool:
    """The same segments (placeholders match anything), two of them in each other's place."""
    if len(a) != len(b) or a == b:
        return False
    diff = [i for i in range(len(a)) if not _same(a[i], b[i])]
    return len(diff) == 2 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]


def _segments_near(a: list[str], b: list[str], what: str) -> tuple[int, str] | None:
    """Near miss of two segment lists: two segments swapped, or one segment mistyped."""
    if _swapped(a, b):
        return 2, f"{what} segments transposed"
    if len(a) != len(b):
        return None
    diff = [(x, y) for x, y in zip(a, b, strict=True) if not _same(x, y)]
    if len(diff) != 1:
        return None
    return _chars_near(*diff[0], what=f"{what} segment")


def _chars_near(a: str, b: str, what: str = "") -> tuple[int, str] | None:
    shortest = min(len(a), len(b))
    if shortest < 3:
        return None
    d = OSA.distance(a, b, score_cutoff=2)
    if d > 2 or (shortest <= 5 and d > 1):
        return None
    swap = len(a) == len(b) and sum(x != y for x, y in zip(a, b, strict=True)) == 2 and d == 1
    label = f"{what} " if what else ""
    if swap:
        return 1, label + ("digit swap" if any(c.isdigit() for c in a) else "transposition")
    return d, label + f"edit distance {d}"


def _url_parts(url: str) -> tuple[str, list[str]]:
    m = re.match(r"([^:/]+://[^/?#]*)([^?#]*)", url)
    if m is None:
        return url, []
    return m.group(1), [s for s in m.group(2).split("/") if s]


def near_token(kind: IdKind, a: str, b: str) -> tuple[int, str] | None:
    """(distance, reason) when token ``a`` looks like a corruption of ``b`` (same kind)."""
    if kind is IdKind.URL:
        host_a, path_a = _url_parts(a)
        host_b, path_b = _url_parts(b)
        if host_a != host_b:
            near = _chars_near(host_a, host_b, "host")
            return near if near is not None and path_a == path_b else None
        return _segments_near(path_a, path_b, "path")
    if kind is IdKind.CONFIG_KEY and "." in a and "." in b:
        near = _segments_near(a.split("."), b.split("."), "key")
        if near is not None:
            return near
    if kind is IdKind.CONFIG_KEY and "/" in a and "/" in b:
        domain_a, _, key_a = a.partition("/")
        domain_b, _, key_b = b.partition("/")
        return _chars_near(key_a, key_b, "key") if domain_a == domain_b else None
    if kind is IdKind.HOSTNAME and a.count(".") == b.count("."):
        near = _segments_near(a.split("."), b.split("."), "host")
        if near is not None:
            return near
    if kind in (IdKind.PORT, IdKind.NUMBER):
        # Numbers next to each other are often both right (ports 5432 and 5433, two key
        # tags); only swapped digits betray a copy error.
        if len(a) == len(b) >= 3 and OSA.distance(a, b) == 1 and sorted(a) == sorted(b):
            return 1, "digit swap"
        return None
    return _chars_near(a, b)
