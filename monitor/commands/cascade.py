"""``casewatch cascade check``: does the cascade's cheap look follow the LLM judge on this
store's traffic? Read-only. The cheap look is the one stored with a turn drawn by the cascade,
else the offline judge run on the stored turn (milliseconds a turn: ``--limit`` bounds it).
"""

from __future__ import annotations

import json
from pathlib import Path

import click
from pydantic import ValidationError

from monitor.commands.store_access import check_assistant, db_options, open_store
from monitor.commands.usage import fail
from monitor.reports.cascade_check import check_doc, render_check
from monitor.schema.turn import TurnEvent
from monitor.stats.cheap_agreement import agreement
from monitor.storage.cascade_pairs import llm_judged
from monitor.stream.steps.decisions import cheap_cell


@click.group("cascade")
def cascade_group() -> None:
    """The cascade's cheap look against the LLM judge (read-only)."""


@cascade_group.command("check")
@db_options
@click.option("--assistant", default=None, help="One assistant (default: all).")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=2000,
    show_default=True,
    help="The newest LLM-judged turns to compare.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def check_command(
    db: str | None, config_file: Path | None, assistant: str | None, limit: int, as_json: bool
) -> None:
    """Measure how well the cheap look follows the LLM judge, and whether the cascade pays."""
    with open_store(db, config_file, need_turns=True) as store:
        check_assistant(store, assistant)
        rows = llm_judged(store, limit=limit, assistant=assistant)
    if not rows:
        fail(
            "the store holds no turn judged by an LLM judge (only the offline judge's verdicts, "
            "which are the cheap look itself): run the daemon with an LLM judge first"
        )
    cells, unreadable = [], 0
    for row in rows:
        if row.cheap_cell is not None:
            cells.append(row.cheap_cell)
            continue
        try:
            cells.append(cheap_cell(TurnEvent.model_validate(row.event)))
        except ValidationError:
            unreadable += 1
            cells.append("")
    keep = [i for i, c in enumerate(cells) if c]
    if unreadable:
        click.echo(f"{unreadable} stored turn(s) not readable as a turn event: left out", err=True)
    result = agreement(
        [cells[i] for i in keep],
        [rows[i].llm_band == "severe" for i in keep],
        [rows[i].inclusion_probability for i in keep],
    )
    doc = check_doc(result, assistant=assistant)
    if as_json:
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
    else:
        click.echo(render_check(doc))


COMMANDS = [cascade_group]
