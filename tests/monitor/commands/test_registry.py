"""The CLI's command table (monitor/commands/__init__.py): lazy for the commands in INDEX."""

from __future__ import annotations

import subprocess
import sys

import click

from monitor.cli import main
from monitor.commands import INDEX, CommandTable, collect, module_commands


def test_every_index_entry_names_the_module_defining_the_command() -> None:
    for name, (module, _summary) in INDEX.items():
        assert name in {c.name for c in module_commands(module)}, (name, module)


def test_the_table_lists_every_command_of_every_module() -> None:
    expected = {c.name for c in collect()} | {"schema"}
    assert set(main.commands) == expected
    assert set(main.list_commands(click.Context(main))) == expected


def test_looking_up_a_fast_command_imports_its_module_only() -> None:
    # A fresh interpreter: this one has imported everything already.
    code = (
        "import sys; from monitor.cli import main; "
        "assert main.commands.get('run') is not None; "
        "print(sorted(m for m in sys.modules if m.startswith('monitor.commands.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    # Beside its module, only the helpers commands share (the store opener, the usage line).
    assert out.strip() == (
        "['monitor.commands.daemon', 'monitor.commands.store_access', 'monitor.commands.usage']"
    )


def test_an_unlisted_or_unknown_name_collects_everything() -> None:
    table = CommandTable()
    assert table.get("no-such-command") is None
    assert "run" in table and len(table) == len(collect())


def test_every_command_is_indexed_with_its_module_and_current_summary() -> None:
    # `casewatch --help` shows INDEX's summaries without importing the modules: they must not
    # drift from the commands' own help.
    commands = collect()
    assert {c.name for c in commands} == set(INDEX)
    for command in commands:
        assert command.name is not None
        module, summary = INDEX[command.name]
        assert command.name in {c.name for c in module_commands(module)}
        assert summary == command.get_short_help_str(limit=10_000), command.name


def test_help_lists_every_command_without_importing_any_command_module() -> None:
    # --help imported every command module (~5 s on a busy node).
    code = (
        "import sys, io, contextlib\n"
        "from monitor.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    try:\n"
        "        main(['--help'], prog_name='casewatch')\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('monitor.commands.')))\n"
        "print(out.getvalue())\n"
    )
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=True
    ).stdout
    imported, _, help_text = out.partition("\n")
    assert imported == "[]"
    for name in [*INDEX, "schema"]:
        assert f"  {name} " in help_text, name
