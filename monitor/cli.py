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


# The commands that run until stopped and whose standard output is the run's log (what it
# does, then its closing lines: the drain, the summary, "stopped"). Their output is written to
# stderr once a pipe's reader went away, so ``| tee`` ended by the same Ctrl-C loses no
# closing line; a command printing data (``casewatch schema | head``) just stops writing.
RUNNING_LOGS = frozenset({"broker", "demo", "run"})


class PipeSafe:
    """A standard stream flushed at each line, through which a reader that went away (``tee``
    killed by the same Ctrl-C) is no error: a stop never fails on EPIPE half-way through
    closing. Once the reader is gone the stream's descriptor points at ``fallback``'s (stderr,
    for a running command's stdout: the terminal, where its closing lines are then read, the
    line that met the closed pipe included), else, or when that is the same pipe (``2>&1 |
    tee``) or gone too, at /dev/null."""

    def __init__(self, stream: TextIO, fallback: TextIO | None = None) -> None:
        self._stream = stream
        self._fallback = fallback
        self._unflushed = ""  # written since the last flush that went through

    def write(self, text: str) -> int:
        self._unflushed += text
        try:
            written = self._stream.write(text)
            if "\n" in text:
                self._stream.flush()
                self._unflushed = ""
        except BrokenPipeError:
            self._reader_gone()
            return len(text)
        return written

    def flush(self) -> None:
        try:
            self._stream.flush()
            self._unflushed = ""
        except BrokenPipeError:
            self._reader_gone()

    def _reader_gone(self) -> None:
        """Point the descriptor at the fallback and write there what the pipe lost (the
        buffer's text is dropped with the failed write); at /dev/null when there is none."""
        while True:
            lost, self._unflushed = self._unflushed, ""
            target = self._fallback_descriptor()
            if target is None:
                devnull = os.open(os.devnull, os.O_WRONLY)
                try:
                    os.dup2(devnull, self._stream.fileno())
                finally:
                    os.close(devnull)
                return
            os.dup2(target, self._stream.fileno())
            try:
                self._stream.write(lost)
                self._stream.flush()
                return
            except BrokenPipeError:  # the fallback's reader is gone too: /dev/null next
                self._unflushed = lost

    def _fallback_descriptor(self) -> int | None:
        """The fallback's descriptor, unless it is the broken one's file (the same pipe)."""
        if self._fallback is None:
            return None
        try:
            target = self._fallback.fileno()
            ours, theirs = os.fstat(self._stream.fileno()), os.fstat(target)
        except (AttributeError, OSError, ValueError):
            return None
        if (ours.st_dev, ours.st_ino) == (theirs.st_dev, theirs.st_ino):
            return None
        return target

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _pipe_safe_std_streams(running_log: bool = False) -> None:
    """stdout and stderr as ``PipeSafe`` streams; with ``running_log`` (a command of
    ``RUNNING_LOGS``), stdout falls back to stderr once its reader is gone."""
    for name in ("stderr", "stdout"):
        stream = getattr(sys, name)
        if isinstance(stream, PipeSafe):
            continue
        try:
            stream.fileno()
        except (AttributeError, OSError, ValueError):  # captured (tests): no descriptor
            continue
        fallback = sys.stderr if name == "stdout" and running_log else None
        setattr(sys, name, PipeSafe(stream, fallback))


@click.group(cls=IndexedGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="casewatch")
@click.pass_context
def main(ctx: click.Context) -> None:
    """casewatch: case-aware quality monitoring for RAG support assistants."""
    _pipe_safe_std_streams(running_log=ctx.invoked_subcommand in RUNNING_LOGS)


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
