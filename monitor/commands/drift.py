"""``casewatch drift``: the daemon's drift analysis, run once from the command line.

Read-only: it reads the windows from ``storage.url`` and prints; the stored ``drift_results``
and the gauges are the daemon job's. Operator errors (bad config, unreachable or unmigrated
database, a bad ``--at``) print one clear message and exit 2.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import click

from monitor.commands.output import num, table
from monitor.commands.store_access import db_option, stored, with_db
from monitor.commands.usage import fail, settings_or_fail
from monitor.jobs.drift import AssistantDrift, DriftRun, analyze_store
from monitor.stats.drift import SignalResult


def _at(value: str | None) -> datetime:
    if value is None:
        return datetime.now(UTC)
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        fail(f"--at {value!r} is not an ISO 8601 time (e.g. 2026-03-10T12:00:00Z)")
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def _verdict(r: SignalResult) -> str:
    if r.status == "insufficient_data":
        return "insufficient_data"
    return "DRIFT" if r.detected else "no drift"


_TEXT_COLUMNS = frozenset({0, 1, 8, 9})


def _print_assistant(a: AssistantDrift) -> None:
    flagged = ", ".join(a.detected) or "none"
    click.echo(
        f"\n{a.assistant}: recent {a.recent_turns} turns, reference {a.reference_turns} turns; "
        f"drift detected: {flagged}"
    )
    header = ["signal", "test", "n recent", "n ref", "stat", "p", "q (BH)", "effect", "", "result"]
    rows = []
    for r in a.results:
        rows.append(
            [
                r.signal,
                r.test,
                str(r.recent_n),
                str(r.reference_n),
                num(r.statistic, 3, tiny_exponent=True),
                num(r.p_value, 3, tiny_exponent=True),
                num(r.q_value, 3, tiny_exponent=True),
                num(r.effect, 3, tiny_exponent=True),
                f"{r.effect_name}>={r.min_effect:g}" if r.status == "ok" else r.effect_name,
                _verdict(r),
            ]
        )
    click.echo(table(header, rows, _TEXT_COLUMNS))
    notes = [f"{r.signal}: {r.note}" for r in a.results if r.note]
    for note in notes:
        click.echo(f"  note: {note}")


def _print(run: DriftRun, alpha: float) -> None:
    w = run.windows
    click.echo(
        f"drift at {run.run_at.isoformat(timespec='seconds')}: "
        f"recent [{w.recent_start.isoformat(timespec='seconds')}, "
        f"{w.recent_end.isoformat(timespec='seconds')}) vs reference "
        f"[{w.reference_start.isoformat(timespec='seconds')}, "
        f"{w.reference_end.isoformat(timespec='seconds')}); "
        f"detected = q < {alpha:g} and |effect| >= minimum"
    )
    if not run.assistants:
        click.echo("no turns in either window: nothing to compare")
    for a in run.assistants:
        _print_assistant(a)


@click.command("drift")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="YAML settings file (storage.url and the drift: section).",
)
@db_option
@click.option("--assistant", help="Only this assistant (default: every one in either window).")
@click.option("--at", "at", help="Analyse as of this ISO 8601 time instead of now.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def drift_command(
    config_file: Path | None, db: str | None, assistant: str | None, at: str | None, as_json: bool
) -> None:
    """Compare each assistant's recent window with its reference window (read-only)."""
    now = _at(at)
    settings = with_db(settings_or_fail(config_file), db)
    with stored(settings.storage.url, need_schema=False) as store:
        run = analyze_store(store, settings.drift, now, assistant=assistant)
    if as_json:
        click.echo(json.dumps(run.to_dict(), indent=2, allow_nan=False))
    else:
        _print(run, settings.drift.alpha)


COMMANDS: list[click.Command] = [drift_command]
