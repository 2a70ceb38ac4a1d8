"""structlog configuration with secret redaction.

JSON lines when stderr is not a terminal (what log shippers want), coloured console otherwise.
The redaction processor runs last before rendering so no processor can re-introduce a secret.
Values are made readable first: a datetime becomes its ISO 8601 text (not its repr) and a float
keeps 4 significant digits (a rate of 0.10344827586206896 reads 0.1034), never fewer than its
integer digits, so a count or an epoch time is not rounded away.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import re
import sys
from collections.abc import Iterable, MutableMapping
from typing import Any, cast

import structlog

REDACTED = "***"
# Keys whose values are secrets whatever they contain.
_SECRET_KEY = re.compile(r"(api[_-]?key|authorization|password|secret|token)$", re.IGNORECASE)
# Bearer tokens and OpenAI-style keys that were never configured (e.g. echoed by a server).
_KEY_PATTERNS = re.compile(r"(Bearer\s+[A-Za-z0-9._\-]{8,}|sk-[A-Za-z0-9_\-]{8,})")


class SecretRedactor:
    """A structlog processor replacing known secret values and secret-looking keys."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: list[str] = []
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        # Longest first so a secret containing another is replaced whole.
        merged = {s for s in [*self._secrets, *secrets] if s and len(s) >= 4}
        self._secrets = sorted(merged, key=len, reverse=True)

    def redact_text(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return _KEY_PATTERNS.sub(REDACTED, text)

    def _clean(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, dict):
            return {
                k: (
                    REDACTED
                    if isinstance(k, str) and _SECRET_KEY.search(k) and v
                    else self._clean(v)
                )
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return type(value)(self._clean(v) for v in value)
        if isinstance(value, BaseException):
            return self.redact_text(repr(value))
        return value

    def __call__(
        self, logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        for key in list(event_dict):
            value = event_dict[key]
            if _SECRET_KEY.search(key) and value:
                event_dict[key] = REDACTED
            else:
                event_dict[key] = self._clean(value)
        return event_dict


SIGNIFICANT_DIGITS = 4


def readable(value: Any) -> Any:
    """``value`` as a person reads it in a log line: ISO times, rounded floats (recursively
    through dicts, lists and tuples); anything else unchanged."""
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, float):
        return _rounded(value)
    if isinstance(value, dict):
        return {k: readable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [readable(v) for v in value]
    if isinstance(value, tuple):
        items = [readable(v) for v in value]
        return cast(Any, type(value))._make(items) if hasattr(value, "_fields") else tuple(items)
    return value


def _rounded(value: float) -> float:
    if value == 0 or not math.isfinite(value):
        return value
    integer_digits = math.floor(math.log10(abs(value))) + 1
    return round(value, max(0, SIGNIFICANT_DIGITS - integer_digits))


def _readable_values(
    logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    for key, value in event_dict.items():
        event_dict[key] = readable(value)
    return event_dict


_redactor = SecretRedactor()


def configure_logging(
    level: str = "info",
    secrets: Iterable[str] = (),
    json: bool | None = None,
    *,
    said_otherwise: Iterable[str] = (),
) -> None:
    """``said_otherwise``: events not logged because the command tells the person the same
    thing in its own output (``casewatch judge`` prints each rejected line once)."""
    _redactor.add(secrets)
    dropped = frozenset(said_otherwise)

    def drop_said(
        logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        if event_dict.get("event") in dropped:
            raise structlog.DropEvent
        return event_dict

    if json is None:
        json = not sys.stderr.isatty()
    renderer: Any = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=True)
    )
    structlog.configure(
        processors=[
            drop_said,
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            _readable_values,
            _redactor,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
