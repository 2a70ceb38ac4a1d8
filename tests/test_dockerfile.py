"""The Dockerfile, checked without building it (no container runtime or base images here):
the stages and base image, the entrypoint, the non-root user the chart expects, no build tools
or caches in the final image, the files it copies, and that the wheel it builds from its build
context is the wheel `pip wheel .` builds from this checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.dockerfile import (
    ROOT,
    copy_sources,
    ignore_patterns,
    ignored,
    runtime_entrypoint,
    stages,
)

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CHART_VALUES = yaml.safe_load((ROOT / "helm" / "casewatch" / "values.yaml").read_text())


def test_two_stages_on_slim_python_311() -> None:
    build, runtime = stages()
    assert build.name == "build"
    assert build.base == runtime.base
    assert runtime.base.startswith("python:3.11-slim")
    assert any("pip wheel" in run for run in build.all("RUN"))


def test_entrypoint_is_the_casewatch_command() -> None:
    assert runtime_entrypoint() == ["casewatch"]
    assert PYPROJECT["project"]["scripts"]["casewatch"] == "monitor.cli:main"
    assert stages()[-1].last("CMD") == '["run"]'


def test_runs_as_the_non_root_user_the_chart_expects() -> None:
    runtime = stages()[-1]
    user, _, group = runtime.last("USER").partition(":")
    assert user.isdigit() and int(user) != 0  # numeric, so runAsNonRoot can verify it
    pod = CHART_VALUES["podSecurityContext"]
    assert (int(user), int(group)) == (pod["runAsUser"], pod["runAsGroup"])
    install = " ".join(runtime.all("RUN"))
    assert f"--uid {user}" in install and f"--gid {group}" in install
    # The working directory (SQLite's default relative path) is the user's, and is where the
    # chart mounts its emptyDir.
    assert runtime.last("WORKDIR") == "/data"
    assert f"-o {user} -g {group} /data" in install


def test_runtime_stage_has_no_build_tools_or_caches() -> None:
    runtime = stages()[-1]
    runs = " ".join(runtime.all("RUN"))
    for tool in ("apt-get", "gcc", "build-essential", "make "):
        assert tool not in runs
    assert "PIP_NO_CACHE_DIR=1" in runtime.last("ENV")
    # The wheels are bind-mounted for the install, never copied into a layer.
    assert not runtime.all("COPY")
    assert "--mount=type=bind,from=build,source=/wheels,target=/wheels" in runs
    assert "--no-index --find-links /wheels" in runs
    assert not runtime.all("ADD")


def test_copied_files_exist_and_reach_the_build_context() -> None:
    patterns = ignore_patterns()
    sources = copy_sources(stages()[0])
    assert sources
    for src, _dest in sources:
        path = ROOT / src
        assert path.exists(), f"the Dockerfile copies {src}, which does not exist"
        assert not ignored(src.rstrip("/"), patterns), f".dockerignore leaves out {src}"


def test_dockerignore_keeps_local_state_out() -> None:
    patterns = ignore_patterns()
    for path in (".venv", ".git", "casewatch.db", "monitor/__pycache__/cli.cpython-311.pyc"):
        assert ignored(path, patterns), path
    for path in ("pyproject.toml", "README.md", "monitor/cli.py", "consumers/_kafka.py"):
        assert not ignored(path, patterns), path


def test_extras_the_image_installs_exist() -> None:
    build, runtime = stages()
    assert '".[postgres]"' in " ".join(build.all("RUN"))
    assert '"casewatch[postgres]"' in " ".join(runtime.all("RUN"))
    assert "postgres" in PYPROJECT["project"]["optional-dependencies"]


def _context_copy(target: Path) -> None:
    """The build stage's WORKDIR after its COPY instructions: what `pip wheel` sees there."""
    patterns = ignore_patterns()
    for src, dest in copy_sources(stages()[0]):
        source = ROOT / src
        dest_path = target / dest
        if source.is_dir():
            for file in sorted(source.rglob("*")):
                rel = file.relative_to(ROOT).as_posix()
                if file.is_file() and not ignored(rel, patterns):
                    out = dest_path / file.relative_to(source)
                    out.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(file, out)
        else:
            out = dest_path / source.name if dest.endswith("/") else dest_path
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, out)


def _checkout_copy(target: Path) -> None:
    """This checkout's files (tracked and untracked, not git-ignored), as `pip wheel .` sees it."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard", "-z"],
        check=True,
        capture_output=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        source = ROOT / rel
        if source.is_symlink() or not source.is_file():
            continue
        out = target / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, out)


def _wheel(project: Path, out: Path) -> Path:
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), "."],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    (wheel,) = out.glob("*.whl")
    return wheel


def _record(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        (record,) = [n for n in zf.namelist() if n.endswith(".dist-info/RECORD")]
        return sorted(zf.read(record).decode().splitlines())


@pytest.mark.integration
def test_image_builds_the_wheel_pip_wheel_builds_here(tmp_path: Path) -> None:
    context, checkout = tmp_path / "context", tmp_path / "checkout"
    _context_copy(context)
    _checkout_copy(checkout)
    image_wheel = _wheel(context, tmp_path / "image-wheels")
    here_wheel = _wheel(checkout, tmp_path / "here-wheels")
    assert image_wheel.name == here_wheel.name
    assert image_wheel.name.startswith(f"casewatch-{PYPROJECT['project']['version']}-")
    # Same files with the same hashes (RECORD), migrations and py.typed included.
    record = _record(image_wheel)
    assert record == _record(here_wheel)
    assert any(line.startswith("monitor/storage/migrations/versions/0001") for line in record)
    with zipfile.ZipFile(image_wheel) as zf:
        (entry_points,) = [n for n in zf.namelist() if n.endswith("entry_points.txt")]
        assert "casewatch = monitor.cli:main" in zf.read(entry_points).decode()
