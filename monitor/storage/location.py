"""Where a SQLite ``storage.url`` keeps its file, for commands that only read.

Opening a SQLite URL creates the file. A read-only command (``casewatch drift``) run where no
daemon ever stored anything would leave an empty ``casewatch.db`` behind and report "no turns";
it checks the file first and says what to run instead.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.exc import ArgumentError


def sqlite_file(url: str) -> Path | None:
    """The database file of a SQLite URL; None for other databases (or an in-memory one)."""
    try:
        parsed = sa.make_url(url)
    except ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


_POINT = "point storage.url (--config or CASEWATCH_STORAGE__URL) at the daemon's database"


def missing_database_message(url: str, point: str = _POINT) -> str | None:
    """A one-line explanation when ``url`` is a SQLite file that does not exist, else None.
    ``point``: how the command is pointed at another database."""
    path = sqlite_file(url)
    if path is None or path.exists():
        return None
    return (
        f"no database at {path} (storage.url): nothing has been stored there. Run the daemon "
        f"first (`casewatch run`, or `casewatch demo --db FILE` to try it), or {point}"
    )


__all__ = ["missing_database_message", "sqlite_file"]
