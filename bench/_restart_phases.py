"""Where a restarted daemon's time goes, from its log (for ``bench/chaos.py``).

A life's log holds the daemon's structured JSON lines and the timeline wrapper's milestones
(``bench/_timeline_daemon.py``); the bench adds the spawn time, the first judge request and
the first new verdict. Each restart becomes a list of milestones (seconds after the spawn,
first occurrence each), and a phase is the time between a milestone and the one reached
before it. Pure functions: the bench does the reading.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

# (milestone event, phase name: the time from the previous milestone reached to this one).
MILESTONES: tuple[tuple[str, str], ...] = (
    ("interpreter_up", "interpreter start"),
    ("cli_imported", "import casewatch cli"),
    ("settings loaded", "import run path + settings"),
    ("startup: store ready", "store open + migrations check"),
    ("startup: source and dead-letter sink ready", "consumer bootstrap + dead-letter producer"),
    ("startup: judge ready", "judge client"),
    ("daemon started", "jobs, probe server, loop start"),
    ("kafka.coordinator_found", "coordinator lookup"),
    ("kafka.join_sent", "to JoinGroup sent"),
    ("kafka.join_received", "JoinGroup (broker round)"),
    ("kafka.sync_received", "SyncGroup (broker round)"),
    ("kafka.offset_fetch_received", "OffsetFetch"),
    ("kafka.fetch_sent", "to first fetch sent"),
    ("kafka.records_returned", "first fetch answered (maybe empty)"),
    ("kafka.records_nonempty", "first fetch answered with records"),
    ("first records polled", "records handed to the daemon"),
    ("judge_request", "to first judge request"),
    ("first_verdict", "judged + stored (first verdict)"),
)
ORDER = {name: i for i, (name, _) in enumerate(MILESTONES)}
PHASE = dict(MILESTONES)
RETRIED = {"kafka.join_sent", "kafka.join_received"}


def _seconds(line: dict[str, Any]) -> float | None:
    if isinstance(line.get("t"), int | float):
        return float(line["t"])
    stamp = line.get("timestamp")
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def milestones(
    log_lines: Iterable[str], spawned: float, extra: dict[str, float | None]
) -> dict[str, float]:
    """Seconds after ``spawned`` of each milestone's first occurrence in the log, plus
    ``extra`` (absolute times, e.g. the first judge request) where known."""
    found: dict[str, float] = {}
    joins = 0
    synced = False
    for raw in log_lines:
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(line, dict):
            continue
        event = str(line.get("event", ""))
        if event == "kafka.join_sent":
            joins += 1
        # A join that needs a member id first (dynamic membership) takes two JoinGroups: the
        # round the broker holds is the last one before the SyncGroup.
        again = event in RETRIED and not synced
        synced = synced or event == "kafka.sync_received"
        if event not in ORDER or (event in found and not again):
            continue
        at = _seconds(line)
        if at is not None:
            found[event] = at - spawned
    for name, at in extra.items():
        if at is not None:
            found[name] = at - spawned
    found["join_rounds"] = float(joins)
    return found


def phases(found: dict[str, float]) -> list[tuple[str, float]]:
    """(phase, seconds) in the order the milestones were reached, each from the one before
    (the order differs between versions: a consumer that joins early overlaps the rest)."""
    reached = sorted((at, name) for name, at in found.items() if name in ORDER)
    out: list[tuple[str, float]] = []
    previous = 0.0
    for at, name in reached:
        out.append((PHASE[name], at - previous))
        previous = at
    return out


def summarize(restarts: Sequence[dict[str, float]]) -> list[dict[str, Any]]:
    """Per phase: median and max seconds over the restarts that have it, and the median time
    its milestone was reached; in the order of that median."""
    per_phase: dict[str, list[float]] = {}
    at: dict[str, list[float]] = {}
    for found in restarts:
        for phase, seconds in phases(found):
            per_phase.setdefault(phase, []).append(seconds)
        for name, phase in MILESTONES:
            if name in found:
                at.setdefault(phase, []).append(found[name])
    rows = [
        {
            "phase": phase,
            "p50_s": round(statistics.median(per_phase[phase]), 2),
            "max_s": round(max(per_phase[phase]), 2),
            "done_at_p50_s": round(statistics.median(at[phase]), 2),
            "n": len(per_phase[phase]),
        }
        for _, phase in MILESTONES
        if phase in per_phase
    ]
    return sorted(rows, key=lambda r: r["done_at_p50_s"])


def render(rows: Sequence[dict[str, Any]]) -> str:
    head = "phase (to its milestone, from the one before)"
    lines = [f"{head:46s} {'p50 s':>7s} {'max s':>7s} {'at p50':>7s}"]
    for r in rows:
        lines.append(
            f"{r['phase']:46s} {r['p50_s']:7.2f} {r['max_s']:7.2f} {r['done_at_p50_s']:7.2f}"
        )
    return "\n".join(lines)
