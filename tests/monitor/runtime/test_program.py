"""How printed lines name casewatch and its extras' install: the venv's own scripts while the
venv is not activated (``make run`` never activates it), the bare name once it is."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from monitor.runtime.program import casewatch_program, install_extra

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent  # not resolved: the venv's bin/, not the interpreter's


@pytest.fixture(autouse=True)
def _not_the_script(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["pytest"])  # as under `python -m ...`


def test_an_environment_not_on_path_is_named_by_its_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert casewatch_program(BIN.parent.parent) == f"{BIN.parent.name}/bin/casewatch"
    assert casewatch_program(tmp_path) == str(BIN / "casewatch")  # not below: absolute
    pip = BIN / "pip"
    shown = pip.relative_to(ROOT) if pip.is_relative_to(ROOT) else pip
    assert install_extra("postgres", ROOT) == f"{shown} install -e '.[postgres]'"


def test_an_activated_environment_is_named_by_the_bare_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", f"{BIN}:/usr/bin:/bin")
    assert casewatch_program(ROOT) == "casewatch"
    assert install_extra("postgres", ROOT) == "pip install -e '.[postgres]'"
    assert install_extra("postgres", ROOT.parent) == f"pip install -e './{ROOT.name}[postgres]'"
