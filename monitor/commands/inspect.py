"""``casewatch inspect``: from an alert to the turns behind it, and one turn in full.

Read-only. ``inspect turns`` lists judged turns newest first with their worst metrics and the
first line of each justification; ``inspect turn EVENT_ID`` shows the case, history, query,
contexts, answer, every judge's scores and reasons, the arbitration, tripwire findings, cost
and latency. ``inspect failures`` and ``inspect failure MODE_ID``
(``inspect_failures.py``) show the failure modes of the failed turns. ``--json`` prints stable
documents for scripts. Bad input exits 2.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import click

from monitor.commands.inspect_case import case_command
from monitor.commands.inspect_failures import failure_command, failures_command
from monitor.commands.store_access import (
    check_assistant,
    db_options,
    open_store,
    parse_time,
    store_args,
)
from monitor.commands.usage import fail
from monitor.errors import CasewatchError
from monitor.reports.turn_view import (
    detail_doc,
    outcome_docs,
    render_detail,
    render_summaries,
    summary_doc,
)
from monitor.runtime.program import casewatch_program
from monitor.schema.turn import METRICS, Band
from monitor.storage.outcomes import OutcomeRecords
from monitor.storage.turn_queries import get_turn, list_turns

_MAX_WIDTH = 100


def _width() -> int:
    return min(shutil.get_terminal_size((_MAX_WIDTH, 24)).columns, _MAX_WIDTH)


def _dump(doc: Any) -> None:
    click.echo(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False, default=str))


@click.group()
def inspect() -> None:
    """Show judged turns and why the judges scored them so (read-only)."""


@inspect.command("turns")
@db_options
@click.option("--assistant", help="Only this assistant.")
@click.option(
    "--metric", type=click.Choice(METRICS), help="Show (and with --band, filter) this metric."
)
@click.option("--band", type=click.Choice([b.value for b in Band]),
              help="Only turns in this band (of --metric, else the turn band).")  # fmt: skip
@click.option("--since", help="Events at or after: ISO 8601 or a duration ago (2h, 1d).")
@click.option("--until", help="Events before: ISO 8601 or a duration ago.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
def turns_command(
    db: str | None,
    config_file: Path | None,
    assistant: str | None,
    metric: str | None,
    band: str | None,
    since: str | None,
    until: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """List judged turns, newest first, with their worst metrics and justifications."""
    start, end = parse_time("--since", since), parse_time("--until", until)
    with open_store(db, config_file, need_turns=True) as store:
        check_assistant(store, assistant)
        try:
            rows = list_turns(
                store, assistant=assistant, metric=metric, band=band,
                since=start, until=end, limit=limit,
            )  # fmt: skip
        except CasewatchError as exc:
            fail(str(exc))
    if as_json:
        _dump([summary_doc(r) for r in rows])
    elif not rows:
        click.echo("no judged turn matches these filters")
    else:
        click.echo(render_summaries(rows, width=_width(), color=sys.stdout.isatty()))
        click.echo(
            f"details: {casewatch_program()} inspect turn EVENT_ID{store_args(db, config_file)}"
        )


@inspect.command("turn")
@db_options
@click.argument("event_id")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def turn_command(db: str | None, config_file: Path | None, event_id: str, as_json: bool) -> None:
    """Show one stored turn in full, with every judgment."""
    with open_store(db, config_file, need_turns=False) as store:
        try:
            detail = get_turn(store, event_id)
        except CasewatchError as exc:
            fail(str(exc))
        if detail is None:
            fail(f"no stored turn has event id {event_id!r} (see `casewatch inspect turns`)")
        doc = detail_doc(detail)
        try:
            rows = OutcomeRecords(store).for_turn(event_id, doc["conversation_id"])
        except CasewatchError as exc:
            fail(str(exc))
        doc["outcomes"] = outcome_docs(rows)
    if as_json:
        _dump(doc)
    else:
        click.echo(render_detail(doc, width=_width(), color=sys.stdout.isatty()))


inspect.add_command(failures_command)
inspect.add_command(failure_command)
inspect.add_command(case_command)

COMMANDS: list[click.Command] = [inspect]
