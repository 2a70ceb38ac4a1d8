"""The README is a front page that holds, and the configuration example of the docs loads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from monitor.settings import load_settings

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
