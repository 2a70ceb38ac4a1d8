"""Test modules share code through tests/support/, tests/fixtures/ and conftest.py files, never
by importing one another: a test module imported elsewhere runs its tests' imports there, and
its helpers change when its tests do."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_no_test_module_imports_another() -> None:
    offenders = {
        f"{path.relative_to(TESTS.parent)}: {name}"
        for path in TESTS.rglob("*.py")
        for name in _imported_modules(path)
        if name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith("test_")
    }
    assert not offenders, sorted(offenders)
