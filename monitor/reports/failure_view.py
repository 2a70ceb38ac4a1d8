"""What ``casewatch inspect failures`` and ``inspect failure MODE_ID`` print (pure: rows in,
text or JSON documents out).

The list shows each assistant's newest run (how many failed turns it read, or why it grouped
nothing), then its modes largest first: id, turns, share, trend (recent share minus earlier
share, in points), whether new or growing, first seen; under each, its label and failing
metrics. One mode
shows its figures and then its turns, newest first, each failing metric with the reason of the
judge that scored it lowest. A mode of cases (unit ``case``) reads the same with cases for
turns: each case by its conversation id, when it was judged, its case band and first query, and
the case judge's reason for each failing case metric.

``--since-change`` ranks the modes among the failed turns since each alarmed detector's
change point, each with its number (what the regression page prints: ``inspect failure``
takes either).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from monitor.stats.detector_state import DetectorState
from monitor.stats.failure_features import FailedTurn, clip
from monitor.storage.failure_modes import ModeRow, ModesSince, mode_number

MISSING = "—"
SINCE_CHANGE_LIMIT = 10  # modes listed since a change point (the page names 3)


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat()


def _short(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M")


def status(m: ModeRow) -> str:
    if not m.present:
        return "gone"
    return "NEW" if m.new else "GROWING" if m.growing else ""


def trend_text(trend: float | None) -> str:
    if trend is None:
        return MISSING
    return f"{100 * trend:+.1f} pts"


def mode_doc(m: ModeRow) -> dict[str, Any]:
    return {
        "assistant": m.assistant,
        "mode_id": m.mode_id,
        "label": m.label,
        "metrics": list(m.metrics),
        "size": m.size,
        "share": m.share,
        "recent": m.recent,
        "earlier": m.earlier,
        "trend": m.trend,
        "new": m.new,
        "growing": m.growing,
        "present": m.present,
        "first_seen": _iso(m.first_seen),
        "last_seen": _iso(m.last_seen),
        "grouped_at": _iso(m.updated_at),
        "examples": list(m.examples),
        "unit": m.unit,
    }


def _noun(unit: str) -> str:
    return "cases" if unit == "case" else "turns"


def run_doc(run: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "assistant": run["assistant"],
        "run_at": _iso(run["run_at"]),
        "status": run["status"],
        "turns": run["turns"],
        "grouped": run["grouped"],
        "unsorted": run["unsorted"],
        "over_cap": run["over_cap"],
        "modes": run["modes"],
        "emerging": run["emerging"],
        "note": run["note"],
        "unit": run.get("unit", "turn"),
    }


def failures_doc(modes: Sequence[ModeRow], runs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    return {"runs": [run_doc(r) for r in runs], "modes": [mode_doc(m) for m in modes]}


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], left: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        cells = zip(row, widths, strict=True)
        return "  ".join(
            c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(cells)
        ).rstrip()

    return [line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def render_failures(
    modes: Sequence[ModeRow], runs: Sequence[Mapping[str, Any]], *, width: int
) -> str:
    out: list[str] = []
    by_assistant: dict[str, list[ModeRow]] = {}
    for m in modes:
        by_assistant.setdefault(m.assistant, []).append(m)
    names = sorted({str(r["assistant"]) for r in runs} | set(by_assistant))
    run_of = {str(r["assistant"]): r for r in runs}
    for name in names:
        if out:
            out.append("")
        run = run_of.get(name)
        if run is None:
            out.append(f"{name}: no grouping run stored")
        else:
            out.append(f"{name}: grouped {_short(run['run_at'])} UTC: {run['note']}")
        modes_of = by_assistant.get(name, [])
        rows = [
            [str(rank), m.mode_id, str(m.size), f"{100 * m.share:.1f}%", trend_text(m.trend),
             status(m), _short(m.first_seen)]
            for rank, m in enumerate(modes_of, start=1)
        ]  # fmt: skip
        if rows:
            unit = modes_of[0].unit
            header = ["#", "mode", _noun(unit), "share", "trend", "", "first seen"]
            lines = _table(header, rows, {1, 5, 6})
            out.extend(lines[:2])
            for line, m in zip(lines[2:], modes_of, strict=True):
                out.append(line)
                # The label and metrics under their mode, cut to the width (never the table).
                out.append("   " + clip(f"{m.label}  ({', '.join(m.metrics)})", width - 3))
    return "\n".join(out)


def mode_turns_doc(m: ModeRow, turns: Sequence[FailedTurn]) -> dict[str, Any]:
    if m.unit == "case":
        return {
            **mode_doc(m),
            "cases": [
                {
                    "conversation_id": t.event_id,
                    "judged_at": _iso(t.at),
                    "case_band": t.band,
                    "first_query": t.query,
                    "failing": list(t.failing),
                    "reasons": dict(t.reasons),
                }
                for t in turns
            ],
        }
    return {
        **mode_doc(m),
        "turns": [
            {
                "event_id": t.event_id,
                "event_time": _iso(t.at),
                "turn_band": t.band,
                "query": t.query,
                "failing": list(t.failing),
                "reasons": dict(t.reasons),
            }
            for t in turns
        ],
    }


def render_mode(m: ModeRow, turns: Sequence[FailedTurn], *, width: int) -> str:
    flag = status(m)
    noun = _noun(m.unit)
    out = [
        f"{m.mode_id} ({m.assistant}){'  ' + flag if flag else ''}",
        f"label:      {m.label}",
        f"metrics:    {', '.join(m.metrics)}",
        f"{noun + ':':<11} {m.size} ({100 * m.share:.1f}% of the window's failed {noun}; "
        f"{m.recent} recent, {m.earlier} earlier; trend {trend_text(m.trend)})",
        f"first seen: {_short(m.first_seen)} UTC   last: {_short(m.last_seen)} UTC   "
        f"grouped: {_short(m.updated_at)} UTC",
    ]
    if not turns:
        out.append("")
        out.append(f"no stored {noun[:-1]} of this mode (purged, or the mode is gone)")
    query = "first query: " if m.unit == "case" else "query: "
    for t in turns:
        out.append("")
        out.append(f"{_short(t.at)}  {t.event_id}  {t.band}")
        shown = clip(t.query, 300) or MISSING
        out.append(textwrap.fill(query + shown, width, subsequent_indent="  "))
        for metric in t.failing:
            reason = clip(t.reasons.get(metric, "") or MISSING, 600)
            line = f"{metric}: {reason}"
            out.append(textwrap.fill(line, width, initial_indent="  ", subsequent_indent="    "))
    return "\n".join(out)


def _since_of(state: DetectorState) -> str:
    return "change point" if state.change_point is not None else "alarm"


def since_change_doc(found: Sequence[tuple[DetectorState, ModesSince]]) -> dict[str, Any]:
    return {
        "regressions": [
            {
                "assistant": state.assistant,
                "signal": state.signal.name,
                "since": _iso(ranked.since),
                "since_kind": _since_of(state).replace(" ", "_"),
                "grouped_at": _iso(ranked.grouped_at),
                "failed": ranked.failed,
                "modes": [
                    {
                        "rank": rank,
                        "mode_id": m.mode_id,
                        "number": mode_number(m.mode_id),
                        "label": m.label,
                        "metrics": list(m.metrics),
                        "turns": n,
                        "share": ranked.share(n),
                    }
                    for rank, (m, n) in enumerate(ranked.modes, start=1)
                ],
            }
            for state, ranked in found
        ]
    }


def render_since_change(found: Sequence[tuple[DetectorState, ModesSince]], *, width: int) -> str:
    out: list[str] = []
    for state, ranked in found:
        if out:
            out.append("")
        out.append(
            f"{state.assistant} {state.signal.name}: in alarm, {_since_of(state)} "
            f"{_short(ranked.since)} UTC"
        )
        if ranked.grouped_at is None:
            out.append("  no grouping run stored: the failure-modes job has not run on this store")
            continue
        out.append(
            f"  {ranked.failed} failed turns since then, as grouped {_short(ranked.grouped_at)} UTC"
        )
        if not ranked.modes:
            out.append("  none of them in a mode")
            continue
        rows = [
            [str(rank), m.mode_id, str(mode_number(m.mode_id)), str(n),
             f"{100 * ranked.share(n):.1f}%"]
            for rank, (m, n) in enumerate(ranked.modes, start=1)
        ]  # fmt: skip
        lines = _table(["#", "mode", "number", "turns", "share"], rows, {1})
        out.extend("  " + line for line in lines[:2])
        for line, (m, _) in zip(lines[2:], ranked.modes, strict=True):
            out.append("  " + line)
            out.append("     " + clip(f"{m.label}  ({', '.join(m.metrics)})", width - 5))
    return "\n".join(out)
