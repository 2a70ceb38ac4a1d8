"""How casewatch finds and configures its Label Studio: the version the install script pins is
the one the code starts, and the review section reads its token from the environment or a file
only, refusing at start what it cannot read."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from monitor.annotation.label_studio_server import (
    LABEL_STUDIO_VERSION,
    find_label_studio,
    label_studio_home,
)
from monitor.config.review import ReviewConfig
from monitor.errors import ConfigError, LabelStudioNotInstalled

ROOT = Path(__file__).resolve().parents[3]


def test_the_install_script_pins_the_version_the_code_starts() -> None:
    script = (ROOT / "scripts" / "ensure-label-studio.sh").read_text()
    pinned = re.search(r"^VERSION=(\S+)$", script, re.M)
    assert pinned is not None and pinned.group(1) == LABEL_STUDIO_VERSION


def test_a_missing_install_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CASEWATCH_LABEL_STUDIO", str(tmp_path / "none"))
    assert label_studio_home() == tmp_path / "none"
    with pytest.raises(LabelStudioNotInstalled, match=r"scripts/ensure-label-studio\.sh"):
        find_label_studio()


def test_the_token_comes_from_the_environment_or_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LS_TOKEN", "abc123")
    assert ReviewConfig(enabled=True, token_env="LS_TOKEN").token() == "abc123"
    (tmp_path / "token").write_text("from-file\n")
    assert ReviewConfig(enabled=True, token_file=tmp_path / "token").token() == "from-file"
    with pytest.raises(ValidationError, match="no token"):
        ReviewConfig(enabled=True)
    with pytest.raises(ValidationError, match="extra"):
        ReviewConfig.model_validate({"enabled": True, "token": "inline"})
    unset = ReviewConfig(enabled=True, token_env="LS_TOKEN_UNSET")
    unset_var = r"review\.token_env: environment variable LS_TOKEN_UNSET"
    with pytest.raises(ConfigError, match=unset_var):
        unset.token()
    with pytest.raises(ValidationError, match="http"):
        ReviewConfig(url="127.0.0.1:8080")
