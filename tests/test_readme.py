"""The README's configuration example is a real, loadable configuration."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from monitor.settings import load_settings

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_yaml_example_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert blocks, "README has no yaml example"
    config = tmp_path / "casewatch.yaml"
    config.write_text(blocks[0], encoding="utf-8")
    monkeypatch.setenv("OPENAI_API_KEY", "readme-example-key")
    settings = load_settings(config)
    assert settings.judge == "primary"
    assert settings.panel is not None and settings.panel.arbiter == "arbiter"
    assert settings.weights() == pytest.approx(settings.all_profiles()["default"])
    assert "readme-example-key" in settings.secret_values()
