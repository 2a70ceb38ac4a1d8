"""Bringing your own database: a URL casewatch cannot use ends the command with one line saying
why and what to do, before any connection. A PostgreSQL URL in an environment without the
driver names the extra to install (the venv ``make run`` builds has only the ``broker`` one); a
typo'd dialect says which are supported; a login the server refuses says it is the login, not
the schema (``casewatch db upgrade`` would not help)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from monitor.cli import main
from monitor.runtime.program import install_extra
from monitor.storage.engine import url_problem
from tests.fixtures.databases import PG_URL, require_postgres

ROOT = Path(__file__).resolve().parents[3]
PG = "postgresql+psycopg://casewatch@127.0.0.1:5432/casewatch"


def _without_psycopg(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in an environment where psycopg is not installed."""
    return subprocess.run(
        [sys.executable, "-m", "tests.without_modules", "psycopg", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--file", "examples/turns.jsonl", "--db", PG],
        ["inspect", "turns", "--db", PG],
        ["labels", "export", "--db", PG, "--assistant", "a", "--out", "/nonexistent/x.jsonl"],
        ["db", "upgrade", "--db", PG],
    ],
    ids=["run", "inspect", "labels", "db"],
)
def test_a_postgresql_url_without_its_driver_names_the_extra_in_one_line(args: list[str]) -> None:
    done = _without_psycopg(*args)
    assert done.returncode == 2, done.stderr
    # One line besides the daemon's JSON log lines: no traceback.
    lines = [x for x in done.stderr.strip().splitlines() if not x.startswith("{")]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "driver 'psycopg', which is not installed" in lines[0]
    assert install_extra("postgres", ROOT) in lines[0]
    assert "password" not in lines[0]


def test_the_install_hint_uses_this_environment_and_the_checkout() -> None:
    hint = install_extra("postgres", ROOT)
    pip = Path(sys.executable).parent / "pip"
    assert hint.split(" install ")[0] in ("pip", str(pip.absolute().relative_to(ROOT)))
    assert hint.endswith(" install -e '.[postgres]'")  # an editable install of this checkout


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("mysql://root@db/casewatch", "unsupported database 'mysql'"),
        ("postgresql+nosuchdriver://u@h/d", "unknown driver 'nosuchdriver'"),
        ("casewatch.db", "'casewatch.db' is not a database URL"),
    ],
)
def test_a_url_casewatch_cannot_use_is_named_before_any_connection(url: str, problem: str) -> None:
    found = url_problem(url)
    assert found is not None and problem in found and "sqlite:///FILE" in found


def test_urls_casewatch_can_use_have_no_problem(tmp_path: Path) -> None:
    assert url_problem(f"sqlite:///{tmp_path / 'x.db'}") is None
    assert url_problem(PG) is None  # the driver is installed here


def test_a_typo_in_the_dialect_ends_inspect_with_one_line(runner: CliRunner) -> None:
    result = runner.invoke(main, ["inspect", "turns", "--db", "mysql://root@db/casewatch"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "casewatch: storage.url mysql://root@db/casewatch: unsupported database 'mysql'; use "
        "sqlite:///FILE or postgresql+psycopg://USER@HOST/DB"
    ]


@pytest.mark.integration
@pytest.mark.parametrize("who", ["nobody_casewatch_knows", "postgres"])
def test_a_login_the_server_refuses_is_reported_as_a_login_problem(
    runner: CliRunner, who: str
) -> None:
    require_postgres()
    host = PG_URL.split("@", 1)[1].split("/", 1)[0]
    # An unknown role, or a known one on a database that does not exist.
    database = "test" if who != "postgres" else "no_such_database_casewatch"
    url = f"postgresql+psycopg://{who}@{host}/{database}"
    result = runner.invoke(main, ["inspect", "turns", "--db", url])
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert "refused the login" in line and "db upgrade" not in line, line
