"""The ``casewatch`` command line. Each command group lives in ``monitor/commands/``."""

from __future__ import annotations

import json
import sys

import click

from monitor import __version__


class IndexedGroup(click.Group):
    """Lists its commands from ``monitor.commands.INDEX`` summaries, so ``casewatch --help``
    imports no command module (and none of their dependencies)."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from monitor.commands import INDEX

        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for name in names:
            summary = INDEX.get(name, (None, None))[1]
            if summary is None:  # defined here (or not indexed): ask the command itself
                command = self.get_command(ctx, name)
                if command is None or command.hidden:
                    continue
                rows.append((name, command.get_short_help_str(limit)))
            else:
                # A bare command carrying the summary shortens it exactly as click would.
                rows.append((name, click.Command(name, help=summary).get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=IndexedGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="casewatch")
def main() -> None:
    """casewatch: case-aware quality monitoring for RAG support assistants."""


@main.command()
def schema() -> None:
    """Print the JSON Schema of the turn event (v1) for producers to validate against."""
    from monitor.models import TurnEvent  # here: `casewatch run` needs it only once started

    doc = TurnEvent.model_json_schema()
    doc["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    doc["title"] = "casewatch TurnEvent v1"
    json.dump(doc, sys.stdout, indent=2)
    sys.stdout.write("\n")


def _register() -> None:
    # Command modules are imported when a command is looked up, not here, so `casewatch schema`
    # and `casewatch run` stay fast and each group can be read (and tested) on its own.
    from monitor.commands import CommandTable

    table = CommandTable()
    for name, command in main.commands.items():  # the ones defined in this module
        table[name] = command
    main.commands = table


_register()

if __name__ == "__main__":  # python -m monitor.cli, without the console script installed
    main(prog_name="casewatch")
