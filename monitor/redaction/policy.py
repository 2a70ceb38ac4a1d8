"""What a redactor looks for: the built-in kinds switched on or off, operator patterns, the
placeholder key and the bound on a turn's text (pure; built from ``redaction`` settings by
``monitor.redaction.config``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

# label values of casewatch_redactions_total{kind} for the built-in detectors
BUILTIN_KINDS = ("secret", "email", "iban", "card", "phone", "ip", "host")
DEFAULT_MAX_CHARS = 1 << 20


@dataclass(frozen=True)
class RedactionPolicy:
    """What to look for. ``patterns``: operator kinds (lower-case names) to compiled regexes."""

    emails: bool = True
    phones: bool = True
    cards: bool = True
    ibans: bool = True
    secrets: bool = True
    ips: bool = False
    hostnames: bool = False
    phone_region: str = "US"
    patterns: Mapping[str, re.Pattern[str]] = field(default_factory=dict)
    key: bytes | None = None  # keyed placeholders, stable across turns
    max_chars: int = DEFAULT_MAX_CHARS

    def kinds(self) -> tuple[str, ...]:
        return BUILTIN_KINDS + tuple(self.patterns)
