"""``casewatch db upgrade`` and ``casewatch db purge`` through click, on a SQLite file."""

from __future__ import annotations

import time
from pathlib import Path

from alembic.script import ScriptDirectory
from click.testing import CliRunner

from monitor.cli import main
from monitor.runtime.clock import ManualClock
from monitor.storage.audit import counts
from monitor.storage.schema import alembic_config
from monitor.storage.store import Store
from tests.fixtures.databases import make_turn, make_verdict

DAY = 86_400.0


def _config(tmp_path: Path, url: str, retention: str = "30") -> Path:
    path = tmp_path / "casewatch.yaml"
    path.write_text(f"storage:\n  url: {url}\n  retention_days: {retention}\n")
    return path


def _seed(url: str, *, days_ago: list[float], now: float) -> None:
    """One verdict per entry, stored ``days_ago`` days before ``now``."""
    clock = ManualClock(start=now)
    store = Store(url, clock=clock)
    for i, age in enumerate(days_ago):
        clock.advance((now - age * DAY) - clock.time())
        turn = make_turn(f"evt-{i}")
        store.save(turn, make_verdict(turn))
    store.close()


HEAD = ScriptDirectory.from_config(alembic_config()).get_current_head()


def test_upgrade_creates_the_schema_and_is_repeatable(
    runner: CliRunner, sqlite_url: str, tmp_path: Path
) -> None:
    config = _config(tmp_path, sqlite_url)
    for _ in range(2):
        result = runner.invoke(main, ["db", "upgrade", "--config", str(config)])
        assert result.exit_code == 0, result.output
        assert f"schema at revision {HEAD}" in result.output
    store = Store(sqlite_url)
    assert counts(store) == {"turns": 0, "verdicts": 0, "judgments": 0}
    store.close()


def test_purge_defaults_to_storage_retention_days(
    runner: CliRunner, sqlite_url: str, tmp_path: Path
) -> None:
    config = str(_config(tmp_path, sqlite_url))
    assert runner.invoke(main, ["db", "upgrade", "--config", config]).exit_code == 0
    _seed(sqlite_url, days_ago=[40, 35, 1], now=time.time())

    result = runner.invoke(main, ["db", "purge", "--config", config])
    assert result.exit_code == 0, result.output
    assert "deleted 2 verdict(s)" in result.output
    store = Store(sqlite_url)
    assert counts(store) == {"turns": 1, "verdicts": 1, "judgments": 2}
    store.close()


def test_purge_older_than_days_overrides_the_config_from_the_environment(
    runner: CliRunner, sqlite_url: str
) -> None:
    env = {"CASEWATCH_STORAGE__URL": sqlite_url}
    assert runner.invoke(main, ["db", "upgrade"], env=env).exit_code == 0
    _seed(sqlite_url, days_ago=[40, 10, 1], now=time.time())

    result = runner.invoke(main, ["db", "purge", "--older-than-days", "5"], env=env)
    assert result.exit_code == 0, result.output
    assert "deleted 2 verdict(s)" in result.output


def test_purge_without_any_retention_is_a_usage_error(
    runner: CliRunner, sqlite_url: str, tmp_path: Path
) -> None:
    config = _config(tmp_path, sqlite_url, retention="null")
    result = runner.invoke(main, ["db", "purge", "--config", str(config)])
    assert result.exit_code == 2
    assert "--older-than-days" in result.output


def test_unreachable_database_is_one_clear_line_and_exit_2(
    runner: CliRunner, tmp_path: Path
) -> None:
    config = _config(tmp_path, "postgresql://postgres:hunter2@127.0.0.1:1/x")
    result = runner.invoke(main, ["db", "upgrade", "--config", str(config)])
    assert result.exit_code == 2
    assert "casewatch: migrating the schema failed on" in result.output
    assert "reachable" in result.output
    assert "hunter2" not in result.output
    assert "Traceback" not in result.output


def test_a_missing_config_file_is_reported(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(main, ["db", "upgrade", "--config", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2  # a configuration problem, as in every command
    assert "does not exist" in result.output
