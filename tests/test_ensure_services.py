"""`make run` and `make test` say what they will install before installing anything:
`scripts/ensure-services.sh --plan` names the Debian packages apt-get would add, and installs
nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "ensure-services.sh"


def _plan(path: str) -> str:
    done = subprocess.run(
        ["/bin/bash", str(SCRIPT), "--plan"],
        capture_output=True, text=True, timeout=60, env={"PATH": path}, check=True,
    )  # fmt: skip
    assert done.stdout == ""
    return done.stderr


def test_the_plan_names_postgresql_when_it_is_missing_and_installs_nothing(tmp_path: Path) -> None:
    # A PATH without pg_isready (nor id: the plan then reports as a non-root user would).
    said = _plan(str(tmp_path))
    assert "postgresql" in said and "nothing will be installed" in said


def test_the_plan_on_this_machine_says_what_apt_get_would_do() -> None:
    said = _plan("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    assert said.startswith("ensure-services: ")
    assert "nothing to install with apt-get" in said or "will install from Debian" in said


def test_make_run_and_make_test_print_the_plan_before_installing() -> None:
    for target in ("run", "test"):
        dry = subprocess.run(
            ["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        lines = dry.stdout.splitlines()
        plan = next(i for i, ln in enumerate(lines) if "ensure-services.sh --plan" in ln)
        pip = next(i for i, ln in enumerate(lines) if "pip install" in ln)
        services = next(i for i, ln in enumerate(lines) if ln.endswith("ensure-services.sh"))
        assert plan < pip < services, lines
