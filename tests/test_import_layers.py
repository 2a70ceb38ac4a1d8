"""Imports point from the entry points toward the core, never back (DESIGN.md, "Layout").

Each package group has a layer; a module may import its own group or any lower layer. Groups
on one layer are independent of each other (judging, storage and stream intake know nothing of
one another). Imports under ``TYPE_CHECKING`` and inside functions count too: a lazy import
is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Lowest first. A group is a module or a package prefix.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("monitor", "monitor.models", "monitor.errors", "monitor.clock", "monitor.processes"),
    ("monitor.scoring", "monitor.logs", "monitor.settings_errors"),
    ("monitor.settings",),
    ("monitor.judging", "monitor.storage", "consumers"),
    ("monitor.exporter",),
    ("monitor.reporting",),
    ("monitor.jobs",),
    ("monitor.stream",),
    ("monitor.commands",),
    ("monitor.cli",),
)


def group_of(module: str) -> tuple[int, str]:
    best: tuple[int, str] | None = None
    for layer, groups in enumerate(LAYERS):
        for group in groups:
            if (module == group or module.startswith(group + ".")) and (
                best is None or len(group) > len(best[1])
            ):
                best = (layer, group)
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            # `from monitor import scoring` imports the module monitor.scoring
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {n for n in names if n.split(".")[0] in {"monitor", "consumers"}}


def project_module(name: str) -> str:
    """The longest prefix of ``name`` that is a module or package of the project."""
    parts = name.split(".")
    while parts:
        base = ROOT.joinpath(*parts)
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            return ".".join(parts)
        parts.pop()
    raise AssertionError(f"{name} is not a project module")


def violations() -> list[str]:
    found = []
    for package in ("monitor", "consumers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue  # Alembic loads env.py; it may read the tables it migrates
            here = module_name(path)
            layer, group = group_of(here)
            for target in sorted(imported(ast.parse(path.read_text(), str(path)))):
                target_layer, target_group = group_of(project_module(target))
                if target_group == group:
                    continue
                if target_layer >= layer:
                    found.append(f"{here} (layer {layer}) imports {target} (layer {target_layer})")
    return found


def test_imports_point_toward_the_core() -> None:
    assert violations() == []


def test_every_module_has_a_layer() -> None:
    for package in ("monitor", "consumers"):
        for path in (ROOT / package).rglob("*.py"):
            group_of(module_name(path))
