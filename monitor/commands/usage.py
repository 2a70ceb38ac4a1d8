"""How every command reports a usage or setup problem: one line on stderr, then exit 2.

Exit codes, the same for every command: 0 done; 2 the operator has something to fix before
running again (a bad option or setting, a missing file or binary, an unreachable broker or
database, a port taken); 1 the work itself failed part-way (offsets not committed, texts that
could not be graded, the demo failing while it runs), with one line saying what was lost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

import click

from monitor.config.settings import Settings, load_settings
from monitor.errors import CasewatchError


def fail(message: str, code: int = 2, *, prog: str = "casewatch") -> NoReturn:
    click.echo(f"{prog}: {message}", err=True)
    raise click.exceptions.Exit(code)


def settings_or_fail(config: Path | None, *, prog: str = "casewatch", **overrides: Any) -> Settings:
    """The settings of ``config`` (and the environment, and ``overrides``), or exit 2 with the
    field that is wrong."""
    try:
        return load_settings(config, **overrides)
    except CasewatchError as exc:
        fail(str(exc), prog=prog)
