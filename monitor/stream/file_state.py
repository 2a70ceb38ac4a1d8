"""Where ``casewatch run --file`` keeps the file source's state: its committed offset and its
dead letters, with the store it feeds, never beside the input (``file_sidecars``); and what
``--file -`` (standard input) uses instead.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from monitor.storage.engine import redact_url
from monitor.storage.location import sqlite_file

STDIN = Path("-")  # `casewatch run --file -`: turns from standard input
STDIN_DLQ = Path("casewatch-stdin.dlq.jsonl")  # in the working directory


def file_state_dir(storage_url: str) -> Path:
    """Where the file source keeps its state: beside a SQLite database, else the user's state
    directory (``$XDG_STATE_HOME/casewatch``, by default ``~/.local/state/casewatch``)."""
    db = sqlite_file(storage_url)
    if db is not None:
        return db.resolve().parent
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "casewatch"


def file_sidecars(path: Path, storage_url: str) -> tuple[Path, Path]:
    """Where the file source keeps its dead letters and its committed offset.

    Never beside the input (a directory of examples or someone else's export need not be
    writable, nor gain files), and keyed by the input and the store together: the position
    is that of the store it feeds, so a new database reads the file from its first line.
    """
    key = hashlib.sha256(f"{path.resolve()}\n{redact_url(storage_url)}".encode()).hexdigest()
    db = sqlite_file(storage_url)
    prefix = f"{db.name}." if db is not None else ""
    stem = f"{prefix}{path.name.removesuffix('.jsonl')}-{key[:8]}"
    where = file_state_dir(storage_url)
    return where / f"{stem}.dlq.jsonl", where / f"{stem}.offsets.json"
