"""How every command reports a usage or setup problem: one line on stderr, then exit 2."""

from __future__ import annotations

from typing import NoReturn

import click


def fail(message: str, code: int = 2, *, prog: str = "casewatch") -> NoReturn:
    click.echo(f"{prog}: {message}", err=True)
    raise click.exceptions.Exit(code)
