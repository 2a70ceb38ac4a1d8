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

Cost: every consumed turn goes through these, so each detector first asks a question C answers
in a pass over the text (is there an ``@``, enough digits, an issuer's prefix) and patterns
start with a character class rather than a look-behind, which lets the regex engine skip
positions that cannot start a match; the boundaries are then checked in Python on the few
matches.

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


def digit_count(text: str) -> int:
    return sum(map(text.count, "0123456789"))


def _left_ok(text: str, start: int, joiners: str) -> bool:
    """Nothing glued on the left: the match does not continue a word or an id."""
    if start == 0:
        return True
    before = text[start - 1]
    return not (before.isalnum() or before == "_" or before in joiners)


def _standalone_matches(
    pattern: re.Pattern[str], text: str, joiners: str
) -> Iterator[re.Match[str]]:
    """Matches with nothing glued on their left. A match refused for its left side is tried
    again one character on, so "123456 4111 1111 1111 1111" still yields the card."""
    pos = 0
    while (m := pattern.search(text, pos)) is not None:
        if _left_ok(text, m.start(), joiners):
            yield m
            pos = m.end()
        else:
            pos = m.start() + 1


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
_PHONE_CANDIDATE = re.compile(r"[+(]?\d[\d \t().\-/]{5,22}\d(?:[ \t]*(?:ext\.?|x)[ \t]*\d{1,5})?")
# Shapes no phone takes: dotted numbers (versions, IPv4, 10.8.4.0/24) and ISO dates.
_NOT_PHONE = re.compile(r"\d{1,4}(?:\.\d{1,3}){2,}(?:/\d+)?|\d{4}-\d{2}-\d{2}(?:\D.*)?")
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
_E164_MAX_DIGITS = 15


def phones(text: str, region: str) -> Iterator[Finding]:
    if digit_count(text) < 7:
        return
    for cand in _PHONE_CANDIDATE.finditer(text):
        chunk = cand.group()
        digits = sum(map(chunk.count, "0123456789"))
        if digits < 7 or _NOT_PHONE.fullmatch(chunk):
            continue
        if digits > _E164_MAX_DIGITS and _CARD.fullmatch(chunk.strip()):
            continue  # a card's digits (the card detector's, which wins the overlap)
        if chunk[0] not in "+(" and not _left_ok(text, cand.start(), ""):
            continue  # digits glued to a word: an id ("ORD2024558812")
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


def phone_e164(raw: str, region: str) -> str:
    """The normalised form ``phones`` gives the number written ``raw``."""
    return phonenumbers.format_number(phonenumbers.parse(raw, region), PhoneNumberFormat.E164)


# ---------------------------------------------------------------- payment card

# Unbroken, or in the groups cards are printed in (4-4-4-4[-3], Amex 4-6-5), one separator.
_CARD = re.compile(
    r"\d{4}(?:\d{9,15}|([ -])\d{4}\1\d{4}\1\d{1,4}(?:\1\d{3})?|([ -])\d{6}\2\d{5})(?![\w-])"
)
# Issuer prefixes (ISO/IEC 7812 IINs of the networks in use): Luhn alone passes 1 number in 10.
_CARD_PREFIX = re.compile(
    r"4|5[1-5]|2(?:2[2-9][1-9]|2[3-9]|[3-6]|7[01]|720)|3[47]|3(?:0[0-5]|[68])|6(?:011|4[4-9]|5)"
    r"|35(?:2[89]|[3-8])|62|5[06-9]|6[0-9]"
)


def cards(text: str) -> Iterator[Finding]:
    if digit_count(text) < 13:
        return
    for m in _standalone_matches(_CARD, text, "-"):
        raw = m.group()
        digits = raw.replace(" ", "").replace("-", "")
        if not 13 <= len(digits) <= 19 or not _CARD_PREFIX.match(digits):
            continue
        if luhn.is_valid(digits):
            yield Finding(m.start(), m.end(), "CARD", digits)


def card_shaped(text: str) -> Iterator[Finding]:
    """Digit runs shaped like a card, checksum or not (for near copies of a detected card)."""
    if digit_count(text) < 13:
        return
    for m in _standalone_matches(_CARD, text, "-"):
        digits = m.group().replace(" ", "").replace("-", "")
        yield Finding(m.start(), m.end(), "CARD", digits)


# ---------------------------------------------------------------- IBAN

_IBAN = re.compile(r"[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b")
_IBAN_MIN_DIGITS = 8  # check digits and a BBAN that is mostly digits in every country
_IBAN_GROUP = re.compile(r" ?[A-Z0-9]{1,4}")


def ibans(text: str) -> Iterator[Finding]:
    if digit_count(text) < _IBAN_MIN_DIGITS:
        return
    for m in _standalone_matches(_IBAN, text, ""):
        raw = m.group()
        # The greedy pattern may take a following capitalised word: try shorter ends too.
        ends = [g.end() for g in _IBAN_GROUP.finditer(raw, 4)]
        for end in reversed(ends):
            compact = stdnum_iban.compact(raw[:end])
            if stdnum_iban.is_valid(compact):
                yield Finding(m.start(), m.start() + end, "IBAN", compact)
                break


def iban_compact(raw: str) -> str:
    return str(stdnum_iban.compact(raw))


def iban_shaped(text: str) -> Iterator[Finding]:
    """IBAN-shaped strings, checksum or not (for near copies of a detected IBAN)."""
    if digit_count(text) < _IBAN_MIN_DIGITS:
        return
    for m in _standalone_matches(_IBAN, text, ""):
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
_TOKEN = re.compile(r"[A-Za-z0-9_\-+]{24,}")
_SECRET_PREFIXES = (
    "sk-", "sk_", "rk_", "pk_", "gho_", "ghp_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox",
    "AKIA", "ASIA", "AIza", "glpat-", "eyJ",
)  # fmt: skip
_BEARER_WORDS = ("bearer", "token", "basic")
_ASSIGNED_WORDS = ("key", "secret", "token", "passw")
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
    if any(p in text for p in _SECRET_PREFIXES):
        for m in _KNOWN_SECRET.finditer(text):
            yield Finding(m.start(), m.end(), "SECRET", m.group())
    lower = text.lower()
    for pattern, words in ((_BEARER, _BEARER_WORDS), (_ASSIGNED, _ASSIGNED_WORDS)):
        if not any(w in lower for w in words):
            continue
        for m in pattern.finditer(text):
            value = m.group(1).rstrip(".")
            if pattern is _ASSIGNED and not _assigned_secret(value):
                continue
            yield Finding(m.start(1), m.start(1) + len(value), "SECRET", value)
    for m in _TOKEN.finditer(text):
        start, end = m.start(), m.end()
        # not part of a path, URL, e-mail or assignment-free identifier
        if not _left_ok(text, start, "/.@:=%-") or (
            end < len(text) and (text[end].isalnum() or text[end] in "_/.@-")
        ):
            continue
        if random_looking(m.group()):
            yield Finding(start, end, "SECRET", m.group())


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


def ip_compressed(raw: str) -> str:
    return ipaddress.ip_address(raw).compressed


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
