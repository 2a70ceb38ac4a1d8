"""The documentation site the README links to: it builds in strict mode, a broken link fails
that build, every page is in the nav, and the reference pages are the code's.

The strict build is what `make docs` runs; here it runs inside the suite, so a page that links
to a missing page, heading or repository file cannot land.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from monitor.config.settings import Settings
from monitor.metrics.exporter import METRIC_NAMES, is_declared

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MKDOCS_YML = ROOT / "mkdocs.yml"
HOOKS = ROOT / "scripts" / "docs_hooks.py"
BUILD_TIMEOUT_S = 600  # generous: the machine may be busy; the build takes seconds


def _gen_reference() -> Any:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_reference
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return gen_reference


def _mkdocs(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # a banner, not a warning of ours
    )


def _config() -> dict[str, Any]:
    loaded = yaml.safe_load(MKDOCS_YML.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def _nav_pages(nav: Any) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in _nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _nav_pages(value)]
    return []


@pytest.mark.integration
def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    result = _mkdocs(MKDOCS_YML, tmp_path / "site")
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").is_file()
    # Pages are files (use_directory_urls: false), and links name them: opened from disk, a
    # link to a directory would show its listing instead of the page.
    assert (tmp_path / "site" / "reference" / "configuration.html").is_file()
    home = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert 'href="demo.html"' in home
    local = re.findall(r'href="(?!https?:|#|mailto:)([^"]+)"', home)
    assert local and not [h for h in local if h.split("#")[0].endswith("/")], local


@pytest.mark.integration
@pytest.mark.parametrize(
    ("page", "why"),
    [
        ("[gone](no-such-page.md)", "no-such-page.md"),
        ("[gone](other.md#no-such-heading)", "no-such-heading"),
        ("[gone](#no-such-heading-here)", "no-such-heading-here"),
        ("[gone](../no-such-file.md)", "no-such-file.md"),
    ],
)
def test_a_broken_link_fails_the_strict_build(tmp_path: Path, page: str, why: str) -> None:
    """The same validation settings and hooks as the real site, on a two-page site with one
    broken link: the build fails and says which link."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(f"# Home\n\n{page}\n", encoding="utf-8")
    (docs / "other.md").write_text("# Other\n\n## A heading\n", encoding="utf-8")
    config = _config()
    config.update(nav=[{"Home": "index.md"}, {"Other": "other.md"}], hooks=[str(HOOKS)])
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    result = _mkdocs(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0
    assert why in result.stderr


@pytest.mark.integration
def test_a_page_left_out_of_the_nav_fails_the_strict_build(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n", encoding="utf-8")
    (docs / "orphan.md").write_text("# Orphan\n", encoding="utf-8")
    config = _config()
    config.update(nav=[{"Home": "index.md"}], hooks=[str(HOOKS)])
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    result = _mkdocs(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0
    assert "orphan.md" in result.stderr


def test_every_page_is_in_the_nav_and_every_nav_entry_exists() -> None:
    in_nav = _nav_pages(_config()["nav"])
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(set(in_nav)) == pages, "add each docs/*.md page to the nav of mkdocs.yml"
    assert len(in_nav) == len(set(in_nav)), "a page is listed twice in the nav"


def test_the_reference_pages_are_what_the_code_generates() -> None:
    for path, text in _gen_reference().pages().items():
        committed = (DOCS / path).read_text(encoding="utf-8")
        assert committed == text, (
            f"docs/{path} is out of date with the code: run "
            "`.venv/bin/python scripts/gen_reference.py` (or `make docs`) and commit it"
        )


def _setting_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every key of the settings, walked here independently of the generator."""
    paths = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        paths.append(path)
        stack: list[tuple[Any, str]] = [(field.annotation, path)]
        while stack:
            annotation, at = stack.pop()
            args = typing.get_args(annotation)
            origin = typing.get_origin(annotation)
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                paths.extend(_setting_paths(annotation, at + "."))
            elif origin is list:
                stack.append((args[0], at + "[]"))
            elif origin is dict:
                stack.append((args[1], at + ".<name>"))
            else:
                stack.extend((arg, at) for arg in args)
    return paths


def test_every_setting_is_in_the_configuration_reference() -> None:
    page = (DOCS / "reference" / "configuration.md").read_text(encoding="utf-8")
    paths = _setting_paths(Settings)
    assert "redaction.phone_region" in paths and "judges.<name>.api_key_env" in paths
    missing = [path for path in paths if f"| `{path}`" not in page and f"## `{path}`\n" not in page]
    assert missing == []


def test_every_metric_is_in_the_metric_reference() -> None:
    page = (DOCS / "reference" / "metrics.md").read_text(encoding="utf-8")
    missing = [name for name in METRIC_NAMES if f"| `{name}` |" not in page]
    assert missing == []


# A metric name in prose: casewatch_ and lower-case words, not part of a recording rule's name
# (level:metric:operations) or of a longer identifier, nor a family's prefix (casewatch_drift_*).
_METRIC_IN_PROSE = re.compile(r"(?<![\w:])casewatch_[a-z0-9_]*[a-z0-9](?![\w:*])")


def test_every_metric_the_docs_name_is_exported() -> None:
    texts = {p: p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *DOCS.rglob("*.md")]}
    unknown = sorted(
        {
            f"{path.relative_to(ROOT)}: {name}"
            for path, text in texts.items()
            for name in _METRIC_IN_PROSE.findall(text)
            if not is_declared(name)
        }
    )
    assert unknown == []


def test_every_dependency_is_in_the_dependency_table() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    required = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        required.extend(extra)
    table = (DOCS / "dependencies.md").read_text(encoding="utf-8").lower()
    names = {re.split(r"[\[<>=!~ ;]", spec, maxsplit=1)[0].lower() for spec in required}
    missing = sorted(name for name in names if name not in table)
    assert missing == [], "say in docs/dependencies.md why each dependency is there"


# Internal tracker numbers mean nothing to a reader: docs, comments, docstrings and messages
# say why instead. Every tracked text file is checked, this one included.
_ISSUE_NUMBER = re.compile(r"\bissues?\s+#?\d+", re.I)


def test_no_internal_issue_numbers_in_docs_or_code() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if tracked.returncode != 0:  # not a git checkout (an sdist): walk the tree instead
        paths = [p for p in ROOT.rglob("*") if p.is_file() and ".venv" not in p.parts]
    else:
        paths = [ROOT / name for name in tracked.stdout.split("\0") if name]
    found = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary, or deleted in the work tree
        for match in _ISSUE_NUMBER.finditer(text):  # on the whole text: a wrapped one too
            number = text.count("\n", 0, match.start()) + 1
            found.append(f"{path.relative_to(ROOT)}:{number}: {match.group(0)!r}")
    assert found == [], "say why instead of citing an issue:\n" + "\n".join(found)
