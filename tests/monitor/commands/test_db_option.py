"""Every command that reads the store takes `--db FILE|URL`, and a SQLite file that does not
exist is refused (exit 2) instead of being created empty."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from monitor.cli import main


def test_db_upgrade_detect_and_drift_take_db(runner: CliRunner, tmp_path: Path) -> None:
    db = tmp_path / "chosen.db"
    up = runner.invoke(main, ["db", "upgrade", "--db", str(db)])
    assert up.exit_code == 0, up.output
    assert str(db) in up.output and db.is_file()
    assert not (tmp_path / "casewatch.db").exists()
    detect = runner.invoke(main, ["detect", "--db", str(db)])
    assert detect.exit_code == 0, detect.output
    assert "no detectors yet" in detect.output
    drift = runner.invoke(main, ["drift", "--db", str(db), "--json"])
    assert drift.exit_code == 0, drift.output
    purge = runner.invoke(main, ["db", "purge", "--db", str(db), "--older-than-days", "30"])
    assert purge.exit_code == 0 and "deleted 0 verdict(s)" in purge.output, purge.output


@pytest.mark.parametrize("command", [["detect"], ["drift"], ["inspect", "turns"]])
def test_a_db_file_that_does_not_exist_is_refused_with_exit_2(
    runner: CliRunner, tmp_path: Path, command: list[str]
) -> None:
    missing = tmp_path / "nope.db"
    result = runner.invoke(main, [*command, "--db", str(missing)])
    assert result.exit_code == 2, result.output
    assert "no database at" in result.output and str(missing) in result.output
    assert not missing.exists()
