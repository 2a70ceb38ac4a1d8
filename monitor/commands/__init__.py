"""CLI command groups; each module exposes click commands collected in COMMANDS."""

from __future__ import annotations

import click

COMMANDS: list[click.Command] = []
