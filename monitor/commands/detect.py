"""``casewatch detect``: the sequential detectors' state as the daemon's job last stored it.

Read-only: reads ``detector_states`` from ``--db`` or ``storage.url`` (every replica's verdicts
went into it through the job on the lease) and prints one line per (assistant, signal), or JSON
(times to the millisecond; for an alarm, the shift whose CUSUM raised it and the observations
since the change point). The rows are parsed by the job's own serializer (``DetectorState``).
Operator errors (bad config, unreachable or unmigrated database) print one message and exit 2.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click

from monitor.commands.output import percent, table
from monitor.commands.store_access import db_option, with_db
from monitor.commands.usage import fail
from monitor.config.settings import load_settings
from monitor.errors import CasewatchError
from monitor.reports.judge_change import JudgeChange, judge_change
from monitor.stats.detector_state import DetectorState
from monitor.storage import canary_runs
from monitor.storage.detection_queries import read_states
from monitor.storage.location import missing_database_message
from monitor.storage.store import Store


def _iso(value: datetime | None) -> str | None:
    # Milliseconds: an alarm and its change point are often seconds apart.
    return None if value is None else value.isoformat(timespec="milliseconds")


def _doc(d: DetectorState) -> dict[str, Any]:
    cal = d.calibration
    latched = d.latched
    return {
        "assistant": d.assistant,
        "signal": d.signal.name,
        "armed": d.armed,
        "baseline_rate": d.baseline_rate,
        "baseline_source": d.baseline_source,
        "reference_turns": d.reference_turns,
        "turn_rate_per_s": d.turn_rate,
        "statistic": d.statistic,
        "alarm": latched is not None,
        "alarm_at": _iso(d.alarm_at if latched is not None else None),
        "change_point": _iso(d.change_point),
        "alarm_shift": None if latched is None else latched.shift,
        "alarm_p1": None
        if latched is None or cal is None
        else cal.rates[d.detector.shifts.index(latched.shift)],
        "observations_since_change": None if latched is None else latched.observations_since,
        "severe_since_change": None if latched is None else latched.severe_since,
        "rate_since_change": None if latched is None else latched.rate_since,
        "observations": d.observations,
        "thresholds": None
        if cal is None
        else [
            {"shift": c, "p1": p1, "h": h}
            for c, p1, h in zip(d.detector.shifts, cal.rates, cal.thresholds, strict=True)
        ],
        "calibrated_at": _iso(d.calibrated_at),
        "updated_at": _iso(d.updated_at),
    }


# Slack before the earliest change point: a judge that moved shortly before the assistant's
# rate did is still "in the same window" (the alert's judge_check annotation looks 6 h back).
JUDGE_WINDOW = timedelta(hours=6)


def _judge_change(store: Store, states: list[DetectorState]) -> JudgeChange:
    """Did the judge move in the window of the alarms (or the last 6 h when none)?"""
    points = [s.change_point for s in states if s.change_point is not None]
    since = (min(points) if points else datetime.now(UTC)) - JUDGE_WINDOW
    return judge_change(
        since, canary_runs.runs_since(store, since), canary_runs.verdict_hashes_since(store, since)
    )


# What the table's words mean (monitor/stats/detection.py), said under it.
STAT_LEGEND = "stat: the highest CUSUM over the shifts, divided by its threshold (1.00 alarms)"
ALARM_LEGEND = (
    "ALARM is latched: every CUSUM restarts from 0 when it alarms, so stat counts from the "
    "alarm on;\nthe alarm clears only when a reverse CUSUM finds the rate back at the baseline"
)


def _line(d: dict[str, Any]) -> list[str]:
    if not d["armed"]:
        state = f"NOT ARMED ({d['reference_turns']} reference turns)"
    elif d["alarm"]:
        state = (
            f"ALARM since {d['change_point']} ({d['alarm_shift']:g}x shift; "
            f"{d['severe_since_change']} of {d['observations_since_change']} severe, "
            f"{percent(d['rate_since_change'], 2)})"
        )
    else:
        state = "watching"
    return [
        d["assistant"],
        d["signal"],
        percent(d["baseline_rate"], 2),
        d["baseline_source"],
        f"{d['statistic']:.2f}",
        str(d["observations"]),
        state,
    ]


@click.command("detect")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="YAML settings file (storage.url).",
)
@db_option
@click.option("--assistant", help="Only this assistant.")
@click.option("--json", "as_json", is_flag=True, help="Print the detectors as JSON.")
def detect_command(
    config_file: Path | None, db: str | None, assistant: str | None, as_json: bool
) -> None:
    """Print the sequential detectors' state (statistic 1.0 = threshold) from the store."""
    try:
        settings = with_db(load_settings(config_file), db)
        missing = missing_database_message(settings.storage.url)
        if missing is not None:
            fail(missing)  # opening it would create an empty file
        store = Store.from_config(settings.storage)
        try:
            states = [DetectorState.from_row(r) for r in read_states(store)]
            judge = _judge_change(store, states)
        finally:
            store.close()
    except CasewatchError as exc:
        fail(str(exc))
    docs = [_doc(s) for s in states if assistant is None or s.assistant == assistant]
    if as_json:
        out = {"detectors": docs, "judge_change": judge.to_dict()}
        click.echo(json.dumps(out, indent=2, allow_nan=False))
        return
    if not docs:
        click.echo("no detectors yet: the detection job has not run on this database")
        return
    header = ["assistant", "signal", "baseline", "source", "stat", "observed", "state"]
    click.echo(table(header, [_line(d) for d in docs], left=frozenset(range(len(header)))))
    click.echo(STAT_LEGEND)
    if any(d["alarm"] for d in docs):
        click.echo(ALARM_LEGEND)
    click.echo(f"judge: {judge.sentence()}")


COMMANDS: list[click.Command] = [detect_command]
