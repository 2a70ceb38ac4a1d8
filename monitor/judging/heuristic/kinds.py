"""The kinds of identifier the heuristic judge recognises, and the identifier value itself.

Kept apart from the extraction code so that the extractors (``identifiers``, ``tokens``) and
their users share one small vocabulary without importing each other.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["IdKind", "Identifier"]


class IdKind(enum.StrEnum):
    ERROR_CODE = "error_code"
    VERSION = "version"
    COMMAND = "command"
    PATH = "path"  # a file system path or a file name
    ARTICLE = "article"
    CONFIG_KEY = "config_key"  # snake_case, dotted.keys, UPPER_CASE, camelCase, domain/keys
    URL = "url"
    HOSTNAME = "hostname"  # DNS names and IPv4 addresses
    RESOURCE = "resource"  # names of letters, digits and hyphens: vol-data-4417, gw-fra-02
    FLAG = "flag"  # --long-option
    PORT = "port"
    ID = "id"  # e-mail addresses, UUIDs, account ids such as acct_51Hq
    NUMBER = "number"  # a bare number of four digits or more: a key tag, a ticket number


@dataclass(frozen=True, slots=True)
class Identifier:
    kind: IdKind
    raw: str  # as written, for justifications
    norm: str  # what comparisons use

    @property
    def weak(self) -> bool:
        """Evidently an identifier only when it nearly matches one of the evidence.

        A bare number, a camelCase word or a hyphenated word without digits ("built-in",
        "raw-footage") is checked for corruption against the evidence, but an answer that
        introduces one has not invented anything identifiable.
        """
        if self.kind is IdKind.NUMBER:
            return True
        if self.kind is IdKind.CONFIG_KEY:  # camelCase is as often a product name as a key
            return not any(c in "_./" for c in self.norm) and not self.norm.isupper()
        return self.kind is IdKind.RESOURCE and not any(c.isdigit() for c in self.norm)
