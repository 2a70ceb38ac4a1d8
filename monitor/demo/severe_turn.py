"""The turn the demo's last line opens: the newest severe turn of the canary, else of any
assistant, else the newest judged turn, read from the demo's SQLite file."""

from __future__ import annotations

from pathlib import Path

from monitor.errors import CasewatchError
from monitor.storage.store import Store
from monitor.storage.turn_queries import list_turns


def severe_turn(db_path: Path, assistant: str | None) -> str | None:
    """The event id of the newest severe turn of ``assistant`` (the canary), else of any
    assistant, else of any judged turn: the one the demo's last line opens."""
    store = Store(f"sqlite:///{db_path}")
    try:
        return _newest_turn(store, assistant)
    except CasewatchError:
        return None  # the hint then shows a placeholder; the demo's outcome does not change
    finally:
        store.close()


def _newest_turn(store: Store, assistant: str | None) -> str | None:
    for who, band in ((assistant, "severe"), (None, "severe"), (None, None)):
        found = list_turns(store, assistant=who, band=band, limit=1)
        if found:
            return found[0].event_id
    return None
