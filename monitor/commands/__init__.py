"""CLI command groups. Every module here may define ``COMMANDS: list[click.Command]``; they are
collected automatically, so adding a command never means editing a shared list.

Collecting imports every module, and with them every command's dependencies (the OpenAI SDK
for pairwise judging, scipy for agreement statistics, ...): seconds on a busy node. A command
that must start fast is listed in ``FAST`` with its module, and ``CommandTable`` imports only
that module to run it. ``casewatch run`` is one: a restarted daemon's time to its first verdict
starts with it. A command missing from ``FAST`` still works (everything is collected to find
it); tests/monitor/commands/test_registry.py checks that every entry names the right module.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator, MutableMapping

import click

FAST: dict[str, str] = {"run": "daemon", "produce": "daemon"}


def module_commands(name: str) -> list[click.Command]:
    module = importlib.import_module(f"{__name__}.{name}")
    return list(getattr(module, "COMMANDS", []))


def collect() -> list[click.Command]:
    found: list[click.Command] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        found.extend(module_commands(info.name))
    return found


class CommandTable(MutableMapping[str, click.Command]):
    """A click group's ``commands``, filled on first need: looking one ``FAST`` command up
    (what click does to run it) imports its module only; anything else (listing, ``--help``,
    an unlisted name) collects every module first."""

    def __init__(self) -> None:
        self._table: dict[str, click.Command] = {}
        self._complete = False

    def _collect_all(self) -> None:
        if not self._complete:
            for command in collect():
                if command.name is not None:
                    self._table.setdefault(command.name, command)
            self._complete = True

    def get(self, key: str, default: click.Command | None = None) -> click.Command | None:  # type: ignore[override]
        if key not in self._table and not self._complete:
            module = FAST.get(key)
            if module is not None:
                for command in module_commands(module):
                    if command.name is not None:
                        self._table.setdefault(command.name, command)
            if key not in self._table:
                self._collect_all()
        return self._table.get(key, default)

    def __getitem__(self, key: str) -> click.Command:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def __setitem__(self, key: str, value: click.Command) -> None:
        self._table[key] = value

    def __delitem__(self, key: str) -> None:
        self._collect_all()
        del self._table[key]

    def __iter__(self) -> Iterator[str]:
        self._collect_all()
        return iter(dict(self._table))

    def __len__(self) -> int:
        self._collect_all()
        return len(self._table)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None


def __getattr__(name: str) -> list[click.Command]:
    # ``COMMANDS`` (every command, all modules imported) for callers that want the whole list.
    if name == "COMMANDS":
        return collect()
    raise AttributeError(name)
