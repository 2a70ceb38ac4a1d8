"""The ``casewatch`` command line. Each command group lives in ``monitor/commands/``."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO

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


class PipeSafe:
    """A standard stream flushed at each line, through which a reader that went away (``tee``
    killed by the same Ctrl-C) is no error: a run's closing lines reach a pipe while it is
    there, and a stop never fails on EPIPE half-way through closing. Once the reader is gone
    the stream writes to /dev/null."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            written = self._stream.write(text)
            if "\n" in text:
                self._stream.flush()
        except BrokenPipeError:
            self._reader_gone()
            return len(text)
        return written

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._reader_gone()

    def _reader_gone(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _pipe_safe_std_streams() -> None:
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if isinstance(stream, PipeSafe):
            continue
        try:
            stream.fileno()
        except (AttributeError, OSError, ValueError):  # captured (tests): no descriptor
            continue
        setattr(sys, name, PipeSafe(stream))


@click.group(cls=IndexedGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="casewatch")
def main() -> None:
    """casewatch: case-aware quality monitoring for RAG support assistants."""
    _pipe_safe_std_streams()


@main.command()
@click.option(
    "--event",
    type=click.Choice(["turn", "outcome"]),
    default="turn",
    show_default=True,
    help="Which event: a turn, or an outcome (feedback on a turn, or a case outcome).",
)
def schema(event: str) -> None:
    """Print the JSON Schema of the turn event (v1) for producers to validate against."""
    # Imported here: `casewatch run` needs them only once started.
    if event == "outcome":
        from monitor.schema.outcome import outcome_schema

        doc = outcome_schema()
    else:
        from monitor.schema.turn import TurnEvent

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
