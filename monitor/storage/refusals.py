"""Tell a row the database refuses (permanent) from a database that is unavailable (transient).

A transient error (connection lost, server down, lock timeout) is worth retrying the same write
later. A refusal is about the data of one row: text PostgreSQL cannot hold (a NUL character, a
lone surrogate in JSONB), a number out of the column's range, a date the driver cannot encode,
a violated constraint. Retrying it fails the same way forever, so a batch that hits one is split
until the refused row is alone (``write_isolating``): the others are written, the refused rows
are handed back with the database's message for the caller to dead-letter or record.

Classified by exception class, which SQLAlchemy derives from the DBAPI's (and psycopg from the
SQLSTATE: class 22 is DataError, class 23 IntegrityError), plus the Python errors drivers raise
while encoding a parameter (SQLite's ``OverflowError`` for an integer beyond 64 bits).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, StatementError

from monitor.errors import UnstorableRow

T = TypeVar("T")
R = TypeVar("R")

# Raised by drivers (or SQLAlchemy's bind processors) while encoding one row's parameters.
_ENCODING_ERRORS = (OverflowError, UnicodeError, ValueError)


def is_refusal(exc: BaseException) -> bool:
    """True when ``exc`` is about the data written, not about the database's availability."""
    if isinstance(exc, UnstorableRow | DataError | IntegrityError):
        return True
    if isinstance(exc, DBAPIError):
        return False  # OperationalError, InterfaceError, ...: the server, not the row
    if isinstance(exc, StatementError):
        # A non-DBAPI error raised while processing the statement's parameters.
        return isinstance(exc.orig, _ENCODING_ERRORS)
    return isinstance(exc, _ENCODING_ERRORS)


def refusal_message(exc: BaseException) -> str:
    """The database's (or driver's) own message, first line only."""
    if isinstance(exc, UnstorableRow):
        return exc.detail
    source = exc.orig if isinstance(exc, StatementError) and exc.orig is not None else exc
    lines = str(source).strip().splitlines()
    return lines[0] if lines else type(source).__name__


@dataclass(frozen=True)
class Refused(Generic[T]):
    """One row the database refused on its own, and why."""

    item: T
    message: str


def write_isolating(
    items: Sequence[T], write: Callable[[Sequence[T]], R]
) -> tuple[list[R], list[Refused[T]]]:
    """Call ``write`` (one transaction) on ``items``; on a refusal, split the batch in halves
    and write each, until every refused item is alone. Returns the results of the writes that
    succeeded and the items refused on their own. Transient errors propagate unchanged (the
    halves written before one stay written: callers' writes are idempotent).

    A single bad row among n costs about 2·log2(n) extra transactions; a batch that is all bad
    costs about 2n.
    """
    results: list[R] = []
    refused: list[Refused[T]] = []
    pending: list[Sequence[T]] = [items] if items else []
    while pending:
        chunk = pending.pop()
        try:
            results.append(write(chunk))
        except Exception as exc:
            if not is_refusal(exc):
                raise
            if len(chunk) == 1:
                refused.append(Refused(chunk[0], refusal_message(exc)))
            else:
                mid = len(chunk) // 2
                # Popped last-in first-out: the first half is written first.
                pending.append(chunk[mid:])
                pending.append(chunk[:mid])
    return results, refused


__all__ = ["Refused", "is_refusal", "refusal_message", "write_isolating"]
