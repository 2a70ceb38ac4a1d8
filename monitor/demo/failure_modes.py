"""What ``casewatch demo`` says of failure modes: each mode the failure-modes job finds for the
canary once it regressed, one line each as it appears, read from the demo's SQLite file."""

from __future__ import annotations

from pathlib import Path

from monitor.errors import CasewatchError
from monitor.reports.failure_view import status
from monitor.runtime.program import casewatch_program
from monitor.storage.failure_modes import ModeRow, list_modes
from monitor.storage.store import Store


def new_modes(db_path: Path, assistant: str, announced: set[str]) -> list[ModeRow]:
    """The modes of ``assistant`` the newest run found that are not in ``announced`` (which
    this adds them to), largest first; none while the store cannot be read."""
    store = Store(f"sqlite:///{db_path}")
    try:
        modes = list_modes(store, assistant)
    except CasewatchError:
        return []  # the next summary tries again; the demo's outcome does not change
    finally:
        store.close()
    fresh = [m for m in modes if m.mode_id not in announced]
    announced.update(m.mode_id for m in fresh)
    return fresh


def mode_line(m: ModeRow, elapsed_s: float) -> str:
    flag = status(m)
    return (
        f"[{elapsed_s:5.0f}s] failure mode {m.mode_id} of {m.assistant}: {m.size} failed turns"
        f"{', ' + flag if flag else ''} ({', '.join(m.metrics)}): {m.label}"
    )


def failures_hint(db_path: Path, assistant: str, announced: int) -> str:
    """The command listing the canary's failure modes, printed before the closing hint."""
    found = (
        f"{announced} failure mode(s) of {assistant} found"
        if announced
        else (
            f"no failure mode of {assistant} found yet (the job groups every "
            "failure_modes.interval_seconds)"
        )
    )
    return (
        f"{found}; the recurring causes behind its failed turns:\n"
        f"  {casewatch_program()} inspect failures --db {db_path} --assistant {assistant}"
    )
