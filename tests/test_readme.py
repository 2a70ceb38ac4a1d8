"""The README is a front page that holds, and the configuration example of the docs loads."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from monitor.config.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CONFIGURATION = ROOT / "docs" / "configuration.md"

# A front page is read whole: what casewatch is, the two commands, a tour, links. Reference
# prose goes to the documentation site (docs/).
MAX_README_LINES = 250


def test_readme_is_a_front_page() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_README_LINES, "move reference prose to docs/"
    for command in ("make run", "make test", "make docs"):
        assert command in text, command


def test_every_link_of_the_readme_points_at_a_file_that_exists() -> None:
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)\s]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert local, "the README links into the docs"
    missing = [link for link in local if not (ROOT / link).exists()]
    assert missing == []


def test_configuration_yaml_example_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", CONFIGURATION.read_text(encoding="utf-8"), re.S)
    assert blocks, "docs/configuration.md has no yaml example"
    config = tmp_path / "casewatch.yaml"
    config.write_text(blocks[0], encoding="utf-8")
    monkeypatch.setenv("OPENAI_API_KEY", "readme-example-key")
    settings = load_settings(config)
    assert settings.judge == "primary"
    assert settings.panel is not None and settings.panel.arbiter == "arbiter"
    assert settings.weights() == pytest.approx(settings.all_profiles()["default"])
    assert "readme-example-key" in settings.secret_values()


def _shell_lines(text: str) -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    return [line.split("#", 1)[0].strip() for block in blocks for line in block.splitlines()]


def test_every_make_target_the_readme_names_exists() -> None:
    targets = set(re.findall(r"^([a-z][\w.-]*):", (ROOT / "Makefile").read_text(), re.M))
    named = set(re.findall(r"`make (\w+)`|^make (\w+)", README.read_text(encoding="utf-8"), re.M))
    names = {a or b for a, b in named}
    assert {"run", "test", "docs"} <= names
    assert names <= targets


def test_every_casewatch_command_the_readme_prints_parses() -> None:
    """Each `.venv/bin/casewatch ...` of the README's shell blocks names a real command and
    only options it takes (parsed by click, not run: the tour's demo runs for minutes)."""
    import click

    from monitor.cli import main

    invocations = [
        part.split("|", 1)[0].split(")", 1)[0]
        for line in _shell_lines(README.read_text(encoding="utf-8"))
        for part in line.split(".venv/bin/casewatch")[1:]
    ]
    assert len(invocations) >= 4, "the tour runs the demo and inspects its turns"
    for invocation in invocations:
        args = shlex.split(invocation)
        command: click.Command = main
        names = ["casewatch"]
        while isinstance(command, click.Group):
            ctx = click.Context(command, info_name=names[-1])
            sub = command.get_command(ctx, args[0])
            assert sub is not None, f"{invocation}: no command {args[0]!r}"
            names.append(args.pop(0))
            command = sub
        command.make_context(" ".join(names), args)  # raises on an unknown option or argument
