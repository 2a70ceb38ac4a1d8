"""``casewatch inspect case CONVERSATION_ID``: a conversation's turns with their verdicts, then
its case verdicts (every version, the newest current) with each case judge's reasons.
Read-only; ``--json`` prints one stable document. ``inspect.py`` adds it to the ``inspect``
group.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import click

from monitor.commands.store_access import db_options, open_store
from monitor.commands.usage import fail
from monitor.errors import CasewatchError
from monitor.reports.case_view import case_doc, render_case
from monitor.storage.case_queries import case_history, case_turns

_MAX_WIDTH = 100


@click.command("case")
@db_options
@click.argument("conversation_id")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def case_command(
    db: str | None, config_file: Path | None, conversation_id: str, as_json: bool
) -> None:
    """Show a conversation's turns with their verdicts, then its case verdicts and reasons."""
    with open_store(db, config_file, need_turns=False) as store:
        try:
            turns = case_turns(store, conversation_id)
            verdicts = case_history(store, conversation_id)
        except CasewatchError as exc:
            fail(str(exc))
    if not turns and not verdicts:
        fail(
            f"no stored turn has conversation id {conversation_id!r} (only sampled "
            "conversations are stored; see `casewatch inspect turns`)"
        )
    doc = case_doc(conversation_id, turns, verdicts)
    if as_json:
        click.echo(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False, default=str))
    else:
        width = min(shutil.get_terminal_size((_MAX_WIDTH, 24)).columns, _MAX_WIDTH)
        click.echo(render_case(doc, width=width))
