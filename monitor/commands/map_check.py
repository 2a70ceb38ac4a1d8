"""``casewatch map-check``: the turn each JSON event becomes under ``mapping``, or why not.

For writing a ``format: mapped`` configuration against real events before pointing the daemon
at the topic: each line of EVENTS.jsonl is mapped exactly as the daemon maps a record, and the
turn (or the dead-letter reason and detail the daemon would give) is printed. Exit 1 when any
event does not map, 0 when all do.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from monitor.commands.usage import fail, settings_or_fail
from monitor.errors import InvalidEvent


@click.command("map-check")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="YAML settings file with the `mapping` section.",
)
@click.argument("events", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def map_check(config_file: Path, events: Path) -> None:
    """Show the turn each JSON event of EVENTS.jsonl becomes under `mapping`, or why not."""
    from monitor.errors import MappingError
    from monitor.schema.mapping import TurnMapping

    settings = settings_or_fail(config_file)
    if not settings.mapping:
        fail(f"{config_file}: no `mapping` section: nothing to check")
    try:
        mapping = TurnMapping.compile(settings.mapping)
    except MappingError as exc:
        fail(str(exc))
    good = bad = 0
    with events.open("rb") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                turn = mapping.decode(line.strip(), settings.kafka.max_message_bytes)
            except InvalidEvent as exc:
                bad += 1
                click.echo(f"line {number}: no turn ({exc.reason}): {exc.detail}")
                continue
            good += 1
            doc = turn.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
            click.echo(f"line {number}: {json.dumps(doc, ensure_ascii=False)}")
    click.echo(f"{good} of {good + bad} event(s) map to a turn")
    if bad:
        raise click.exceptions.Exit(1)


COMMANDS: list[click.Command] = [map_check]
