"""The turn and the case the demo's last lines open: the newest severe turn of the canary,
else of any assistant, else the newest judged turn, and the newest severe case of the canary,
else that turn's conversation, read from the demo's SQLite file."""

from __future__ import annotations

from pathlib import Path

from monitor.errors import CasewatchError
from monitor.storage.case_queries import newest_case
from monitor.storage.store import Store
from monitor.storage.turn_queries import get_turn, list_turns


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


def severe_case(db_path: Path, assistant: str | None, event_id: str | None) -> str | None:
    """The conversation the demo's last line opens as a case: the newest severe case of
    ``assistant`` (the canary), else the conversation of ``event_id`` (the turn the line
    before opens: its case may not have closed yet)."""
    store = Store(f"sqlite:///{db_path}")
    try:
        found = newest_case(store, assistant, band="severe")
        if found is None and event_id is not None:
            detail = get_turn(store, event_id)
            found = None if detail is None else str(detail.event["conversation_id"])
        return found
    except CasewatchError:
        return None  # the hint then shows a placeholder; the demo's outcome does not change
    finally:
        store.close()
