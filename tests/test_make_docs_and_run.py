"""The two Makefile paths a new user takes after the demo, held to what they promise:

- `make docs` installs the small ``docs`` extra (no model server, no test tools), and that
  extra holds everything mkdocs.yml and the reference generator import; the built site's links
  work opened from disk (``use_directory_urls: false``) and `make docs-serve` serves it;
- `make run PORT=N` passes the port to `casewatch demo`; the editable install `make run` does
  shows no setuptools warning box.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement  # MkDocs' own dependency

ROOT = Path(__file__).resolve().parents[1]
MAKE = shutil.which("make")
needs_make = pytest.mark.skipif(MAKE is None and os.environ.get("CI") != "true", reason="no make")


def _make_n(*args: str) -> list[str]:
    """The commands `make` would run (``-n``: none is run), as if every target were stale."""
    result = subprocess.run(
        ["make", "-n", "-B", *args], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return result.stdout.splitlines()


def _mkdocs_config() -> dict[str, object]:
    loaded = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def _top_level_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def _closure(requirements: list[str]) -> set[str]:
    """Every installed distribution ``requirements`` bring, extras followed (normalised)."""
    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        key = f"{name}[{','.join(sorted(req.extras))}]"
        if key in seen:
            continue
        seen.add(key)
        for extra in req.extras or {""}:
            for spec in md.requires(req.name) or []:
                child = Requirement(spec)
                if child.marker is None or child.marker.evaluate({"extra": extra}):
                    todo.append(child)
    return {key.split("[")[0] for key in seen}


def _distributions_of(modules: set[str]) -> set[str]:
    owners = md.packages_distributions()
    found = set()
    for module in modules:
        if module in sys.stdlib_module_names or module in ("monitor", "consumers"):
            continue
        assert module in owners, f"{module} is imported but no installed distribution has it"
        found.update(re.sub(r"[-_.]+", "-", d).lower() for d in owners[module])
    return found


def test_the_docs_extra_holds_what_the_site_build_imports() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    docs = project["optional-dependencies"]["docs"]
    config = _mkdocs_config()
    theme = config["theme"]
    assert isinstance(theme, dict)
    modules = {"mkdocs", str(theme["name"])}
    for extension in config.get("markdown_extensions", []):  # type: ignore[attr-defined]
        name = next(iter(extension)) if isinstance(extension, dict) else str(extension)
        # A dotted name is its own package's; a bare one is one of Markdown's own.
        modules.add(name.split(".")[0] if "." in name else "markdown")
    assert not config.get("plugins"), "a plugin: add its distribution to the docs extra"
    for hook in config.get("hooks", []):  # type: ignore[attr-defined]
        modules |= _top_level_imports(ROOT / str(hook))
    modules |= _top_level_imports(ROOT / "scripts" / "gen_reference.py")
    # The package's own dependencies come with `.[docs]`; the dev install's do not.
    available = _closure([*project["dependencies"], *docs])
    missing = sorted(_distributions_of(modules) - available)
    assert missing == [], f"add to the docs extra of pyproject.toml: {missing}"
    assert not any(Requirement(r).name in ("llama-cpp-python", "pytest") for r in docs)


def test_the_site_links_pages_as_files_so_it_works_from_disk() -> None:
    assert _mkdocs_config()["use_directory_urls"] is False


@needs_make
def test_make_docs_installs_the_docs_extra_not_the_dev_install() -> None:
    commands = _make_n("docs")
    assert any("-e '.[docs]'" in c for c in commands), commands
    assert not any("build-model-server" in c or "realmodel" in c for c in commands), commands
    assert any("mkdocs build --strict" in c for c in commands)
    assert any("make docs-serve" in c for c in commands)  # where search works


@needs_make
def test_make_docs_serve_serves_the_built_site() -> None:
    commands = _make_n("docs-serve", "DOCS_PORT=8123")
    assert any(re.search(r"-m http\.server .*--directory site 8123$", c) for c in commands)


@needs_make
def test_make_run_passes_port_to_the_demo() -> None:
    [with_port] = [c for c in _make_n("run", "PORT=9471") if "casewatch demo" in c]
    assert with_port.split()[-2:] == ["--port", "9471"]
    [default] = [c for c in _make_n("run") if "casewatch demo" in c]
    assert "--port" not in default


@needs_make
@pytest.mark.integration
def test_make_runs_editable_install_shows_no_warning_box(tmp_path: Path) -> None:
    """The install line of `make run`, as make would run it, into a throwaway venv with the
    pip `make run` upgrades to (dependencies left out: the box comes from the build backend)."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("monitor", "consumers"):
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("*.pyc"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
        check=True,
        capture_output=True,
        timeout=600,
    )
    [install] = [c for c in _make_n(".venv/.run-stamp") if "pip install --quiet -e" in c]
    install = install.replace(".venv/bin/python", str(python)) + " --no-deps"
    result = subprocess.run(
        ["sh", "-c", install], cwd=source, capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Editable installation" not in result.stdout + result.stderr
    assert "!!" not in result.stderr
