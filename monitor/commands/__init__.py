"""CLI command groups. Every module here may define ``COMMANDS: list[click.Command]``; they are
collected automatically, so adding a command never means editing a shared list."""

from __future__ import annotations

import importlib
import pkgutil

import click


def _collect() -> list[click.Command]:
    found: list[click.Command] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        found.extend(getattr(module, "COMMANDS", []))
    return found


COMMANDS: list[click.Command] = _collect()
