"""Detectors of personal data and secrets in free text: pure functions over one string.

Each detector yields ``Finding(start, end, kind, normalised)``; ``normalised`` is the form
two spellings of one value share (an e-mail in lower case, a phone in E.164, a card's digits),
so that they get the same placeholder. Checksums decide where a pattern alone would guess:
cards pass Luhn (python-stdnum) and carry a known issuer prefix, IBANs pass ISO 13616's
mod-97 (python-stdnum), phones are what Google's libphonenumber (``phonenumbers``) calls a
valid number. Secrets are recognised by their issuers' prefixes (OpenAI, Stripe, GitHub,
Slack, AWS, Google, GitLab), as ``Bearer`` tokens and JWTs, and as long random-looking tokens
that mix upper case, lower case and digits (hex hashes and UUIDs, which support text quotes
on purpose, are never random-looking by that test).

No I/O, no state: safe from any thread or process.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Iterator
from typing import NamedTuple

import phonenumbers
from phonenumbers import Leniency, PhoneNumberFormat, PhoneNumberMatcher
from stdnum import iban as stdnum_iban
from stdnum import luhn

__all__ = [
    "Finding",
    "card_shaped",
    "cards",
    "custom",
    "emails",
    "hostnames",
    "iban_shaped",
    "ibans",
    "ips",
    "phones",
    "secrets",
]


class Finding(NamedTuple):
    start: int
    end: int
    kind: str
    normalised: str


# ---------------------------------------------------------------- e-mail

_EMAIL = re.compile(
    r"(?<![\w.%+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
    r"[A-Za-z]{2,24}(?![\w-])"
)


def emails(text: str) -> Iterator[Finding]:
    if "@" not in text:
        return
    for m in _EMAIL.finditer(text):
        yield Finding(m.start(), m.end(), "EMAIL", m.group().lower())


# ---------------------------------------------------------------- phone

# Where a phone number may be: 7+ digits with the separators people write. Only these windows
# go to libphonenumber's matcher (it costs ~100 µs per kilobyte of text scanned otherwise).
_PHONE_CANDIDATE = re.compile(
    r"(?:\+|\(|\b)\(?\d[\d \t().\-/]{5,22}\d(?:[ \t]*(?:ext\.?|x)[ \t]*\d{1,5})?"
)
# An id, a version, a path or a timestamp continues across these: a number inside one is no phone.
_ID_JOINERS = frozenset("-_/#:.=@&?%\\")


def _standalone(text: str, start: int, end: int) -> bool:
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    if before.isalnum() or before in _ID_JOINERS:
        return False
    if after.isalnum() or after == "_":
        return False
    # "-" or "." then a digit or letter continues an id ("…-0042", "….3"); at a sentence end no
    return not (after in _ID_JOINERS and end + 1 < len(text) and text[end + 1].isalnum())


# A bare run of digits ("2022931972") is an invoice or order number as often as a phone: it
# counts as a phone only after a word that says so.
_PHONE_WORDS = re.compile(
    r"(?i)(?:phone|mobile|cell|call|tel|reach|number|whatsapp|sms|text|fax|contact|dial|ring)"
    r"\w*\W{0,4}(?:\w+\W{1,3}){0,3}$"
)
_CONTEXT_CHARS = 40


def phones(text: str, region: str) -> Iterator[Finding]:
    for cand in _PHONE_CANDIDATE.finditer(text):
        chunk = cand.group()
        if sum(c.isdigit() for c in chunk) < 7:
            continue
        if chunk.isdigit():
            before = text[max(0, cand.start() - _CONTEXT_CHARS) : cand.start()]
            if not _PHONE_WORDS.search(before):
                continue
        offset = cand.start()
        for m in PhoneNumberMatcher(chunk, region, leniency=Leniency.VALID):
            start, end = offset + m.start, offset + m.end
            if not _standalone(text, start, end):
                continue
            e164 = phonenumbers.format_number(m.number, PhoneNumberFormat.E164)
            yield Finding(start, end, "PHONE", e164)


# ---------------------------------------------------------------- payment card

# Unbroken, or in the groups cards are printed in (4-4-4-4[-3], Amex 4-6-5), one separator.
_CARD = re.compile(
    r"(?<![\w-])(?:\d{13,19}|\d{4}([ -])\d{4}\1\d{4}\1\d{1,4}(?:\1\d{3})?|\d{4}([ -])\d{6}\2\d{5})"
    r"(?![\w-])"
)
# Issuer prefixes (ISO/IEC 7812 IINs of the networks in use): Luhn alone passes 1 number in 10.
_CARD_PREFIX = re.compile(
    r"4|5[1-5]|2(?:2[2-9][1-9]|2[3-9]|[3-6]|7[01]|720)|3[47]|3(?:0[0-5]|[68])|6(?:011|4[4-9]|5)"
    r"|35(?:2[89]|[3-8])|62|5[06-9]|6[0-9]"
)


def cards(text: str) -> Iterator[Finding]:
    for m in _CARD.finditer(text):
        raw = m.group()
        digits = raw.replace(" ", "").replace("-", "")
        if not 13 <= len(digits) <= 19 or not _CARD_PREFIX.match(digits):
            continue
        if luhn.is_valid(digits):
            yield Finding(m.start(), m.end(), "CARD", digits)


def card_shaped(text: str) -> Iterator[Finding]:
    """Digit runs shaped like a card, checksum or not (for near copies of a detected card)."""
    for m in _CARD.finditer(text):
        digits = m.group().replace(" ", "").replace("-", "")
        yield Finding(m.start(), m.end(), "CARD", digits)


# ---------------------------------------------------------------- IBAN

_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b")
_IBAN_GROUP = re.compile(r" ?[A-Z0-9]{1,4}")


def ibans(text: str) -> Iterator[Finding]:
    for m in _IBAN.finditer(text):
        raw = m.group()
        # The greedy pattern may take a following capitalised word: try shorter ends too.
        ends = [g.end() for g in _IBAN_GROUP.finditer(raw, 4)]
        for end in reversed(ends):
            compact = stdnum_iban.compact(raw[:end])
            if stdnum_iban.is_valid(compact):
                yield Finding(m.start(), m.start() + end, "IBAN", compact)
                break


def iban_shaped(text: str) -> Iterator[Finding]:
    """IBAN-shaped strings, checksum or not (for near copies of a detected IBAN)."""
    for m in _IBAN.finditer(text):
        yield Finding(m.start(), m.end(), "IBAN", stdnum_iban.compact(m.group()))


# ---------------------------------------------------------------- secrets

_KNOWN_SECRET = re.compile(
    r"(?<![\w-])(?:"
    r"sk-(?:proj-|ant-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"
    r"|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{22,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|AIza[0-9A-Za-z_-]{35}"
    r"|glpat-[A-Za-z0-9_-]{20,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r")(?![\w-])"
)
_BEARER = re.compile(r"\b(?:Bearer|Token|Basic)[ \t]+([A-Za-z0-9._~+/-]{16,}=*)", re.IGNORECASE)
_ASSIGNED = re.compile(
    r"(?i)\b(?:api[_-]?key|apikey|secret(?:[_-]?key)?|access[_-]?token|auth[_-]?token|password"
    r"|passwd|client[_-]?secret|x-api-key)[\"']?[ \t]*[:=][ \t]*[\"']?([^\s\"',;]{8,})"
)
# A random-looking token: long, from a base64url alphabet, not part of a path or URL.
_TOKEN = re.compile(r"(?<![\w/.@:=%-])[A-Za-z0-9_\-+]{24,}(?![\w/.@-])")
_MIN_ENTROPY_BITS = 3.6  # per character; English words and code identifiers stay below


def _entropy(token: str) -> float:
    counts: dict[str, int] = {}
    for c in token:
        counts[c] = counts.get(c, 0) + 1
    n = len(token)
    return -sum(k / n * math.log2(k / n) for k in counts.values())


def random_looking(token: str) -> bool:
    upper = sum(c.isupper() for c in token)
    lower = sum(c.islower() for c in token)
    digits = sum(c.isdigit() for c in token)
    if upper < 2 or lower < 2 or digits < 2:
        return False  # hex hashes, UUIDs, CONSTANT_NAMES, kebab-case keys and words
    if "_" in token or "-" in token:
        # snake_case / kebab-case identifiers have long letter runs between separators
        parts = re.split(r"[_-]", token)
        if max(len(p) for p in parts) < 16:
            return False
    return _entropy(token) >= _MIN_ENTROPY_BITS


def secrets(text: str) -> Iterator[Finding]:
    for m in _KNOWN_SECRET.finditer(text):
        yield Finding(m.start(), m.end(), "SECRET", m.group())
    for pattern in (_BEARER, _ASSIGNED):
        for m in pattern.finditer(text):
            value = m.group(1).rstrip(".")
            if pattern is _ASSIGNED and not _assigned_secret(value):
                continue
            yield Finding(m.start(1), m.start(1) + len(value), "SECRET", value)
    for m in _TOKEN.finditer(text):
        if random_looking(m.group()):
            yield Finding(m.start(), m.end(), "SECRET", m.group())


def _assigned_secret(value: str) -> bool:
    # "password: <redacted>", "api_key: ${OPENAI_API_KEY}" or prose ("the secret: `kubectl …`")
    # name a secret without holding one; a credential mixes letters and digits.
    if not value[0].isalnum() or value.isupper():
        return False
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


# ---------------------------------------------------------------- network identifiers

_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w.]|\.\d)")
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")
_HOST = re.compile(
    r"(?<![\w.@-])(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}(?![\w-]|\.\w)"
)
_FILE_SUFFIXES = frozenset(
    {"py", "js", "ts", "json", "yaml", "yml", "toml", "md", "txt", "log", "conf", "cfg", "ini"}
    | {"sh", "exe", "dll", "so", "xml", "html", "csv", "zip", "gz", "tar", "pdf", "png", "jpg"}
)


def ips(text: str) -> Iterator[Finding]:
    for pattern in (_IPV4, _IPV6):
        for m in pattern.finditer(text):
            try:
                address = ipaddress.ip_address(m.group())
            except ValueError:
                continue
            yield Finding(m.start(), m.end(), "IP", address.compressed)


def hostnames(text: str) -> Iterator[Finding]:
    for m in _HOST.finditer(text):
        name = m.group().lower()
        if name.rsplit(".", 1)[1] in _FILE_SUFFIXES:
            continue
        before = text[max(0, m.start() - 3) : m.start()]
        if before.endswith(("#", "/")) and not before.endswith("//"):
            continue  # a URL's path or fragment ("re.html#re.VERBOSE"), not its host
        yield Finding(m.start(), m.end(), "HOST", name)


# ---------------------------------------------------------------- operator patterns


def custom(text: str, kind: str, pattern: re.Pattern[str]) -> Iterator[Finding]:
    for m in pattern.finditer(text):
        if m.end() > m.start():
            yield Finding(m.start(), m.end(), kind, m.group())
