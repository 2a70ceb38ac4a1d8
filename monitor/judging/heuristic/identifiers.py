"""Structured identifiers in support text, and the near-misses that betray their corruption.

Case-Aware (M6, J.4) treats a corrupted error code, version, command flag or path as a
high-severity failure: an operator who copies ``E4012`` instead of ``E4021`` searches the wrong
article, and a mistyped flag either fails or does something else. This module finds those
identifiers in free text, normalises them so that spelling variants of the same identifier
compare equal, and finds for an answer identifier absent from the evidence the evidence
identifier of the same kind it most probably corrupts.

Pure functions and precompiled patterns only: no I/O, no state, safe from any thread.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from rapidfuzz.distance import Levenshtein

from monitor.judging.heuristic.kinds import Identifier, IdKind
from monitor.judging.heuristic.tokens import (
    TEXT_CACHE_SIZE,
    TOKEN_KINDS,
    extract_tokens,
    fills_template,
    may_contain,
    near_token,
    normalise_token,
    remembered,
)
from monitor.redaction.placeholders import PLACEHOLDER

__all__ = [
    "IdKind",
    "Identifier",
    "IdentifierCheck",
    "NearMiss",
    "check",
    "extract",
    "extract_joined",
    "find_near_miss",
    "normalise",
]


@dataclass(frozen=True, slots=True)
class NearMiss:
    """An answer identifier that is a small corruption of an evidence identifier."""

    found: Identifier
    expected: Identifier
    distance: int
    reason: str

    def describe(self) -> str:
        return f"answer has {self.found.raw}, evidence has {self.expected.raw} ({self.reason})"


@dataclass(frozen=True, slots=True)
class IdentifierCheck:
    """How the answer's identifiers relate to the evidence's."""

    matched: tuple[Identifier, ...]
    near_misses: tuple[NearMiss, ...]
    novel: tuple[Identifier, ...]  # absent from the evidence, and no near-miss either


# ---------------------------------------------------------------- patterns

# Prefixes that look like error codes but name articles, hashes or standards.
_ARTICLE_PREFIXES = ("KB", "KBA", "ART", "DOC", "TSB")
_NOT_ERROR_PREFIXES = frozenset(
    {"SHA", "MD", "RFC", "ISO", "UTF", "TLS", "IPV", "AES", "RSA", "CPU", "DDR", "PCI", "USB"}
    | {"TCP", "UDP", "HTTP", "HTTPS", "CVE", "ENT", "GB", "MB", "TB", "KB", "NVME", "RAID"}
    | set(_ARTICLE_PREFIXES)
)

_ARTICLE = re.compile(r"\b(KBA|KB|ART|DOC|TSB)[-_]?(\d{3,8})\b", re.IGNORECASE)
_PREFIXED_CODE = re.compile(r"\b([A-Z]{1,5})(-?)(\d{3,6})\b")
_SNAKE_CODE = re.compile(r"\b(?:ERR|ERROR|E|STATUS|NT_STATUS|WSA)_[A-Z0-9]+(?:_[A-Z0-9]+)*\b")
_ERRNO = re.compile(
    r"\bE(?:CONNRESET|CONNREFUSED|CONNABORTED|TIMEDOUT|NOSPC|ACCES|PERM|NOENT|HOSTUNREACH"
    r"|NETUNREACH|PIPE|AGAIN|EXIST|BUSY|MFILE|STALE|NOTCONN|ADDRINUSE|IO)\b"
)
_THREE_DIGITS = re.compile(r"\d{3}")
_E_UPPER = re.compile(r"E[A-Z]")
_HEX_CODE = re.compile(r"\b0x[0-9A-Fa-f]{4,16}\b")
_HTTP_STATUS = re.compile(
    r"\b(?:HTTPS?(?:/\d(?:\.\d)?)?|status(?:\s+code)?)\s*:?\s*([1-5]\d\d)\b", re.IGNORECASE
)
_HTTP_PHRASES = (
    "Bad Request",
    "Unauthorized",
    "Forbidden",
    "Not Found",
    "Conflict",
    "Too Many Requests",
    "Internal Server Error",
    "Bad Gateway",
    "Service Unavailable",
    "Gateway Timeout",
)
_HTTP_PHRASE = re.compile(rf"\b([45]\d\d)\s+(?:{'|'.join(_HTTP_PHRASES)})\b")
# "error 1603", "exit code 2"; not "return 502 Bad Gateway" (that is the HTTP status).
_NUMERIC_ERROR = re.compile(
    r"\b(?:(error)\s*[:#]?\s*(\d{3,6})|(error|exit|return)\s+code\s*[:#]?\s*(\d{1,6}))\b(?!\.\d)",
    re.IGNORECASE,
)

_VERSION = re.compile(r"(?<![\w./\\-])([vV]?)(\d+(?:\.\d+)+)(?:-[0-9A-Za-z]+)?(?![\w/\\]|\.\d)")
_DOT_DIGIT = re.compile(r"\.\d")  # what a version needs
_VERSION_CONTEXT = re.compile(
    r"(?:version|release|firmware|build|patch|fixed in|upgrade to|update to|upgraded to"
    r"|updated to|running|os|console|agent|app)\W{0,3}$",
    re.IGNORECASE,
)
_UNIT_AFTER = re.compile(r"\s*(?:%|[KMGT]i?B\b|ms\b|s\b|seconds?\b|minutes?\b|x\b|GHz\b)")

_UNIX_PATH = re.compile(r"(?<![\w:/.~-])(~?/(?:[\w.@+-]+/)*[\w.@+-]+/?)")
_UNIX_ROOTS = frozenset(
    {"etc", "var", "opt", "usr", "home", "tmp", "dev", "proc", "srv", "mnt", "sys", "root"}
)
_WIN_PATH = re.compile(r"\b[A-Za-z]:\\(?:[\w.()$-]+(?: [\w.()$-]+)*\\)*[\w.()$-]*")

_BACKTICK = re.compile(r"`([^`\n]{2,300})`")
_FENCE = re.compile(r"```[\w-]*[ \t]*\n(.*?)```", re.DOTALL)
_PROMPT_LINE = re.compile(r"^[ \t]*(?:\$|PS(?: [A-Za-z]:\\[^>\n]*)?>|#)[ \t]+(\S.*)$", re.M)
_CLI = (
    r"systemctl|journalctl|kubectl|docker|podman|helm|az|aws|gcloud|curl|wget|openssl|ssh"
    r"|rsync|iscsiadm|multipath|lsblk|lsscsi|fsck|mount|umount|showmount|nslookup|dig"
    r"|traceroute|ping|netstat|iptables|nft|chronyc|ipconfig|netsh|msiexec|robocopy"
    r"|vssadmin|klist|iperf3|mtx|Get-[A-Za-z]+|Set-[A-Za-z]+|Restart-[A-Za-z]+"
    r"|Start-[A-Za-z]+|Stop-[A-Za-z]+|[a-z][a-z0-9-]*(?:ctl|adm|cli)|[a-z]+-admin"
)
_INLINE_CLI = re.compile(rf"(?<![\w/.-])(?:sudo\s+)?(?:{_CLI})(?=\s+[^\s])[^\n`;]*")
# What an inline command needs: every program name of _CLI ends with one of these words (or
# holds one of _CLI_PARTS), and is followed by white space. A text whose words, joined by
# single spaces, hold none of them followed by a space holds no inline command.
_CLI_WORDS = (
    "ctl adm cli admin docker podman helm az aws gcloud curl wget openssl ssh rsync multipath"
    " lsblk lsscsi fsck mount nslookup dig traceroute ping netstat iptables nft chronyc ipconfig"
    " netsh msiexec robocopy klist iperf3 mtx"
)
_CLI_ENDINGS = tuple(f"{word} " for word in _CLI_WORDS.split())
_CLI_PARTS = ("Get-", "Set-", "Restart-", "Start-", "Stop-")
# Where a command written in running prose stops: sentence punctuation or a connective.
_INLINE_END = re.compile(
    r"[.,;:!?](?:\s|$)|\s+(?:and|then|to|if|before|after|so|which|or|until|once|on|in|"
    r"from|for|with|as|again|first)\s"
)
_PROMPT_PREFIX = re.compile(r"^(?:\$|#|PS(?: [A-Za-z]:\\[^>]*)?>)\s+")
_SUDO = re.compile(r"^sudo\s+")
_SPACES = re.compile(r"\s+")
# "prog args...": a command for sure, no need to test it against every other kind.
_PROGRAM_CALL = re.compile(r"^(?!(?:HTTPS?|error|exit|return|status)\b)[A-Za-z][\w.-]*\s+\S", re.I)
_TRAILING = ".,;:)\"'"
_MIN_COMMAND_TOKENS = 2

# Differing only in these words makes two commands different commands, not a typo of one.
_VERBS = frozenset(
    {"start", "stop", "status", "restart", "reload", "enable", "disable", "get", "describe"}
    | {"delete", "apply", "logs", "show", "set", "list", "add", "remove", "create", "update"}
    | {"test", "run", "reset", "clear", "verify", "check", "import", "export", "sync", "on"}
    | {"off", "lock", "unlock", "mount", "umount", "login", "logout"}
)


# ---------------------------------------------------------------- normalisation


def normalise(kind: IdKind, raw: str) -> str:
    """The comparison form of an identifier: spelling variants of one identifier are equal."""
    if kind in TOKEN_KINDS:
        return normalise_token(kind, raw)
    text = raw.strip().strip(_TRAILING)
    if kind is IdKind.ERROR_CODE:
        text = _SPACES.sub(" ", text.upper())
        return re.sub(r"^([A-Z]+)-(\d)", r"\1\2", text)
    if kind is IdKind.ARTICLE:
        m = _ARTICLE.fullmatch(text)
        return f"{m.group(1).upper()}{m.group(2)}" if m else text.upper().replace("-", "")
    if kind is IdKind.VERSION:
        parts = text.lstrip("vV").split(".")
        # 4.12.0 and 4.12 name the same release; 4.0 stays 4.0.
        while len(parts) > 2 and parts[-1].isdigit() and int(parts[-1]) == 0:
            parts.pop()
        return ".".join(p.lstrip("0") or "0" if p.isdigit() else p for p in parts)
    if kind is IdKind.PATH:
        if re.match(r"^[A-Za-z]:\\", text):
            return text.lower().rstrip("\\")
        return text.rstrip("/") or "/"
    text = _PROMPT_PREFIX.sub("", _SPACES.sub(" ", text))
    return _SUDO.sub("", text).strip(_TRAILING + " ")


# ---------------------------------------------------------------- extraction


def _mask(text: str, spans: Sequence[tuple[int, int]]) -> str:
    if not spans:
        return text
    chars = list(text)
    for start, end in spans:
        chars[start:end] = " " * (end - start)
    return "".join(chars)


def _looks_like_version(text: str, start: int, prefix: str, body: str, end: int) -> bool:
    parts = body.split(".")
    if prefix:
        return True
    if len(parts) == 4 and all(p.isdigit() and int(p) <= 255 for p in parts):
        return False  # an IPv4 address
    if _UNIT_AFTER.match(text, end):
        return False
    if len(parts) >= 3 or (parts[0].isdigit() and 2000 <= int(parts[0]) <= 2099):
        return True
    return bool(_VERSION_CONTEXT.search(text[max(0, start - 25) : start]))


def _error_codes(text: str) -> list[tuple[int, str]]:
    # A pass whose pattern needs what the text lacks (three digits in a row, an upper-case
    # letter, "0x", "error") could match nothing and is skipped.
    found: list[tuple[int, str]] = []
    digits = _THREE_DIGITS.search(text) is not None
    upper = text.lower() != text
    if digits and upper:
        for m in _PREFIXED_CODE.finditer(text):
            if m.group(1) not in _NOT_ERROR_PREFIXES:
                found.append((m.start(), m.group(0)))
    for pattern, needed in (
        (_SNAKE_CODE, "_" in text),
        (_ERRNO, _E_UPPER.search(text) is not None),
        (_HEX_CODE, "0x" in text),
    ):
        if needed:
            found.extend((m.start(), m.group(0)) for m in pattern.finditer(text))
    if digits and may_contain(text, "http", "status"):
        for m in _HTTP_STATUS.finditer(text):
            found.append((m.start(), f"HTTP {m.group(1)}"))
    if digits and any(phrase in text for phrase in _HTTP_PHRASES):
        for m in _HTTP_PHRASE.finditer(text):
            found.append((m.start(), f"HTTP {m.group(1)}"))
    if may_contain(text, "error", "exit", "return"):
        for m in _NUMERIC_ERROR.finditer(text):
            word, number = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            found.append((m.start(), f"{word.upper()} {number}"))
    return found


def _paths(text: str) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    if "/" not in text and ":\\" not in text:
        return found
    for m in _UNIX_PATH.finditer(text):
        path = m.group(1).rstrip(".,;:)")
        segments = [s for s in path.split("/") if s and s != "~"]
        if len(segments) >= 2 or (segments and segments[0] in _UNIX_ROOTS):
            found.append((m.start(1), path))
    for m in _WIN_PATH.finditer(text) if ":\\" in text else ():
        path = m.group(0).rstrip(".,;:) ")
        if len(path) > 3:
            found.append((m.start(), path))
    return found


def _command_or_other(body: str) -> tuple[IdKind, str] | None:
    """Classify backtick content: a path, code, article or version when that is all it holds,
    a command otherwise."""
    body = body.strip()
    if not body:
        return None
    if not _PROGRAM_CALL.match(body):
        candidates = [
            *((IdKind.PATH, p) for _, p in _paths(body)),
            *((IdKind.ERROR_CODE, c) for _, c in _error_codes(body)),
            *((IdKind.ARTICLE, m.group(0)) for m in _ARTICLE.finditer(body)),
            *((IdKind.VERSION, m.group(0)) for m in _VERSION.finditer(body)),
        ]
        for kind, raw in candidates:
            if len(raw) >= len(body) - 1:
                return kind, raw
    return IdKind.COMMAND, body


def _may_call_cli(text: str) -> bool:
    """False only when ``_INLINE_CLI`` finds nothing in the text (a scan of it is slow)."""
    flat = " ".join(text.split())
    return any(end in flat for end in _CLI_ENDINGS) or any(p in flat for p in _CLI_PARTS)


def _commands(text: str) -> list[tuple[int, IdKind, str]]:
    """Commands from fences, backticks, prompt lines and inline CLI calls.

    Fences, backticks and prompt lines are blanked out before the next pass looks at the text,
    so that no command is reported twice.
    """
    found: list[tuple[int, IdKind, str]] = []
    spans: list[tuple[int, int]] = []
    for m in _FENCE.finditer(text) if "```" in text else ():
        spans.append(m.span())
        for line in m.group(1).splitlines():
            line = _PROMPT_PREFIX.sub("", line.strip())
            if line and not line.startswith("#"):
                found.append((m.start(1), IdKind.COMMAND, line))
    masked = _mask(text, spans)
    for m in _BACKTICK.finditer(masked) if "`" in masked else ():
        spans.append(m.span())
        classified = _command_or_other(m.group(1))
        if classified is not None:
            found.append((m.start(1), *classified))
    masked = _mask(text, spans)
    prompt = "$" in masked or "#" in masked or ">" in masked
    for m in _PROMPT_LINE.finditer(masked) if prompt else ():
        line = m.group(1).strip()
        tokens = line.split()
        # "# Steps" is a markdown heading; "# systemctl restart x" is a root prompt.
        if m.group(0).lstrip().startswith("#") and not (tokens[0][:1].islower()):
            continue
        if len(tokens) >= _MIN_COMMAND_TOKENS:
            spans.append(m.span())
            found.append((m.start(1), IdKind.COMMAND, line))
    masked = _mask(text, spans)
    for m in _INLINE_CLI.finditer(masked) if _may_call_cli(masked) else ():
        candidate = m.group(0)
        end = _INLINE_END.search(candidate)
        if end is not None:
            candidate = candidate[: end.start()]
        candidate = candidate.strip().rstrip(_TRAILING)
        if len(candidate.split()) >= _MIN_COMMAND_TOKENS:
            found.append((m.start(), IdKind.COMMAND, candidate))
    return found


def extract(text: str) -> tuple[Identifier, ...]:
    """All identifiers in the text, in order of appearance, each (kind, norm) once.

    Identifiers inside commands are reported on their own as well: a corrupted version inside
    an upgrade command is both a wrong command and a wrong version.

    Remembered for the last texts read (a pure function of the text: a case, a knowledge-base
    chunk or an earlier message comes back turn after turn).
    """
    return _extract(text)


@remembered
@lru_cache(maxsize=TEXT_CACHE_SIZE)
def _extract(text: str) -> tuple[Identifier, ...]:
    found: list[tuple[int, IdKind, str]] = []
    found.extend(_commands(text))
    # Redaction placeholders (<EMAIL_1>) are whole identifiers; nothing else is read inside one.
    held = [(m.start(), m.end()) for m in PLACEHOLDER.finditer(text)] if "<" in text else []
    if held:
        found.extend((start, IdKind.ID, text[start:end]) for start, end in held)
    if may_contain(text, "kb", "art", "doc", "tsb"):
        for m in _ARTICLE.finditer(text):
            found.append((m.start(), IdKind.ARTICLE, m.group(0)))
    found.extend((pos, IdKind.ERROR_CODE, raw) for pos, raw in _error_codes(text))
    for m in _VERSION.finditer(text) if _DOT_DIGIT.search(text) else ():
        if _looks_like_version(text, m.start(), m.group(1), m.group(2), m.end()):
            found.append((m.start(), IdKind.VERSION, m.group(0)))
    found.extend((pos, IdKind.PATH, raw) for pos, raw in _paths(text))
    found.extend(extract_tokens(text))
    if held:
        found = [
            f for f in found if f[1] is IdKind.COMMAND or not any(s < f[0] < e for s, e in held)
        ]
    found.sort(key=lambda item: item[0])
    seen: set[tuple[IdKind, str]] = set()
    result: list[Identifier] = []
    for _, kind, raw in found:
        norm = normalise(kind, raw)
        if norm and (kind, norm) not in seen:
            seen.add((kind, norm))
            result.append(Identifier(kind, raw.strip().rstrip(_TRAILING), norm))
    return tuple(result)


# A version right after a line break may take its context word from the line before
# ("running\n4.12"): a seam followed by one is read whole.
_SEAM_HEAD = re.compile(r"\W{0,2}[vV\d]")
_SENTENCE_END = (".", "!", "?")


def extract_joined(parts: Sequence[str]) -> tuple[Identifier, ...]:
    """``extract("\\n".join(parts))``, read part by part where that is the same, so that the
    readings of earlier messages are reused.

    It is the same when no identifier can span a seam or read across it: every part but the
    last ends a sentence (its last visible character is ".", "!" or "?": what spans a line
    break, "status\\n404", "error\\n1603", "sudo\\nkubectl ...", cannot pass one) and holds
    no code fence, and no part after a seam starts with a version (which takes its context
    word from before it). Otherwise the joined text is read whole.
    """
    if len(parts) < 2:
        return extract("\n".join(parts))
    for before, after in itertools.pairwise(parts):
        if (
            "```" in before
            or not before.rstrip().endswith(_SENTENCE_END)
            or _SEAM_HEAD.match(after)
        ):
            return extract("\n".join(parts))
    seen: set[tuple[IdKind, str]] = set()
    result: list[Identifier] = []
    for part in parts:
        for ident in extract(part):
            if (ident.kind, ident.norm) not in seen:
                seen.add((ident.kind, ident.norm))
                result.append(ident)
    return tuple(result)


# ---------------------------------------------------------------- near-misses


def _is_transposition(a: str, b: str) -> bool:
    if len(a) != len(b):
        return False
    diff = [i for i in range(len(a)) if a[i] != b[i]]
    return len(diff) == 2 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]


def _command_near_miss(a: str, b: str) -> tuple[int, str] | None:
    ta, tb = a.split(), b.split()
    if not ta or not tb or ta[0] != tb[0]:
        return None  # a different program is a different command
    if len(ta) == len(tb):
        # A token filling an evidence placeholder (`--cluster <name>`) is the same token.
        diff = [(x, y) for x, y in zip(ta, tb, strict=True) if x != y and not fills_template(x, y)]
        if len(diff) != 1:
            return None
        x, y = diff[0]
        if x.lower() in _VERBS and y.lower() in _VERBS:
            return None
        d = Levenshtein.distance(x, y)
        both_flags = x.startswith("-") and y.startswith("-")
        if d <= 2 or (both_flags and d <= 4):
            label = "flag differs" if both_flags else f"edit distance {d}"
            return d, f"{label}: {x} vs {y}"
        return None
    if abs(len(ta) - len(tb)) == 1:
        longer, shorter = (ta, tb) if len(ta) > len(tb) else (tb, ta)
        for i, token in enumerate(longer):
            if token.startswith("-") and longer[:i] + longer[i + 1 :] == shorter:
                return len(token), f"flag {token} {'added' if longer is ta else 'dropped'}"
    return None


def _placeholder_near(a: str, b: str) -> tuple[int, str] | None:
    """Two redaction placeholders: of one kind but not equal, they stand for two different
    values (say the case's card and another one in the answer): a mismatch whose size the
    placeholders do not tell, so it is reported at the smallest distance."""
    ma, mb = PLACEHOLDER.fullmatch(a), PLACEHOLDER.fullmatch(b)
    if ma is None or mb is None or ma.group(1) != mb.group(1) or a == b:
        return None
    return 1, f"a different {ma.group(1).lower()} than the evidence's"


def _near(kind: IdKind, a: str, b: str) -> tuple[int, str] | None:
    """(distance, reason) when ``a`` looks like a corruption of ``b``; None otherwise."""
    if kind is IdKind.ID and a.startswith("<") and b.startswith("<"):
        return _placeholder_near(a, b)
    if kind in TOKEN_KINDS:
        return near_token(kind, a, b)
    if kind is IdKind.COMMAND:
        return _command_near_miss(a, b)
    if kind is IdKind.VERSION:
        pa, pb = a.split("."), b.split(".")
        if pa[0] != pb[0]:
            return None  # another major version is another release, not a typo
        d = Levenshtein.distance(a, b, score_cutoff=2)
        return (d, "version contradiction") if d <= 2 else None
    shortest = min(len(a), len(b))
    d = Levenshtein.distance(a, b, score_cutoff=2)
    if d > 2 or (shortest <= 4 and d > 1):
        return None
    if kind in (IdKind.ERROR_CODE, IdKind.ARTICLE):
        # Codes of another family (E4021 vs W4021 is a typo, ORA-1 vs SCIM-1 is not).
        letters_a, letters_b = re.sub(r"[^A-Z]", "", a), re.sub(r"[^A-Z]", "", b)
        if letters_a != letters_b and Levenshtein.distance(letters_a, letters_b) > 1:
            return None
    if _is_transposition(a, b):
        return d, "digit swap" if any(c.isdigit() for c in a) else "transposition"
    return d, f"edit distance {d}"


def find_near_miss(ident: Identifier, evidence: Iterable[Identifier]) -> NearMiss | None:
    """The closest evidence identifier of the same kind that ``ident`` probably corrupts.

    Returns None when ``ident`` is itself in the evidence or nothing of its kind is close.
    """
    same_kind = [e for e in evidence if e.kind is ident.kind]
    if any(e.norm == ident.norm for e in same_kind):
        return None
    best: NearMiss | None = None
    for candidate in same_kind:
        near = _near(ident.kind, ident.norm, candidate.norm)
        if near is not None and (best is None or near[0] < best.distance):
            best = NearMiss(ident, candidate, near[0], near[1])
    return best


def _occurs(needle: str, haystack: str) -> bool:
    """Whole-token occurrence: `--expire` does not occur in `--expired`."""
    start = haystack.find(needle)
    while start != -1:
        end = start + len(needle)
        before = haystack[start - 1] if start else " "
        after = haystack[end] if end < len(haystack) else " "
        if not (before.isalnum() or before in "-_") and not (after.isalnum() or after in "-_"):
            return True
        start = haystack.find(needle, start + 1)
    return False


_TEMPLATED = (IdKind.COMMAND, IdKind.URL, IdKind.PATH)


def check(
    answer: Sequence[Identifier], evidence: Sequence[Identifier], evidence_text: str = ""
) -> IdentifierCheck:
    """Sort the answer's identifiers into matched, near-miss (corrupted) and novel.

    Commands and paths also count as matched when they occur verbatim in ``evidence_text``:
    evidence often writes a command in prose, where extraction may cut it differently.
    """
    # The evidence with its white space runs made single spaces, made the first time it is
    # searched (most answers' identifiers are all in the evidence's by kind and norm).
    flat_evidence: str | None = None
    norms = {(e.kind, e.norm) for e in evidence}
    matched: list[Identifier] = []
    near: list[NearMiss] = []
    novel: list[Identifier] = []
    for ident in answer:
        if (ident.kind, ident.norm) in norms:
            matched.append(ident)
            continue
        if ident.kind in (IdKind.COMMAND, IdKind.PATH) or ident.kind in TOKEN_KINDS:
            if flat_evidence is None:
                flat_evidence = _SPACES.sub(" ", evidence_text)
            if ident.kind in (IdKind.COMMAND, IdKind.PATH) and _occurs(ident.norm, flat_evidence):
                matched.append(ident)
                continue
            if ident.kind in TOKEN_KINDS and _occurs(ident.raw, flat_evidence):
                matched.append(ident)
                continue
        if ident.kind in _TEMPLATED and any(
            e.kind is ident.kind and fills_template(ident.norm, e.norm) for e in evidence
        ):
            matched.append(ident)  # the evidence's command or URL with its placeholders filled
            continue
        miss = find_near_miss(ident, evidence)
        if miss is not None:
            near.append(miss)
        else:
            novel.append(ident)
    return IdentifierCheck(tuple(matched), tuple(near), tuple(novel))
