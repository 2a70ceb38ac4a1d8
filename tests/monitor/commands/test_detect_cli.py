"""``casewatch detect`` through click: the detectors' state the job stored (read-only)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from monitor.cli import main
from monitor.jobs.detection import DetectionJob
from monitor.jobs.recorders import DetectionRecorder
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.scoring.turn import DEFAULT_CRITICAL_METRICS
from monitor.storage.store import Store
from tests.fixtures.detection import Feed, config

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    """canary regressed 5 % -> 40 % (alarm), stable at 5 %, fresh too new to be armed."""
    url = f"sqlite:///{tmp_path / 'casewatch.db'}"
    clock = ManualClock(start=NOW.timestamp())
    store = Store(url, clock=clock)
    store.migrate()
    feed = Feed(store, clock)
    for name in ("canary", "stable"):
        feed.turns(name, 2000, 0.05, at=NOW - timedelta(days=2))
    feed.turns("fresh", 50, 0.05, at=NOW - timedelta(days=2))
    job = DetectionJob(
        config(),
        list(DEFAULT_CRITICAL_METRICS),
        store,
        DetectionRecorder(Metrics(CollectorRegistry())),
        clock=clock,
    )
    job.run_once()
    for _ in range(20):
        clock.advance(15)
        feed.turns("canary", 30, 0.4)
        feed.turns("stable", 30, 0.05)
        job.run_once()
    store.close()
    path = tmp_path / "casewatch.yaml"
    path.write_text(f"storage:\n  url: {url}\n")
    return path


def test_json_reports_the_alarm_the_quiet_and_the_unarmed(runner: CliRunner, seeded: Path) -> None:
    result = runner.invoke(main, ["detect", "--config", str(seeded), "--json"])
    assert result.exit_code == 0, result.output
    docs = {(d["assistant"], d["signal"]): d for d in json.loads(result.output)["detectors"]}
    canary = docs[("canary", "turn_severe")]
    assert canary["alarm"] is True and canary["armed"] is True
    assert canary["change_point"] is not None and canary["rate_since_change"] > 0.2
    assert 0.03 < canary["baseline_rate"] < 0.07
    assert len(canary["thresholds"]) == 4
    # Times to the millisecond, the shift that alarmed and what was seen since the change.
    for field in ("alarm_at", "change_point", "updated_at"):
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", canary[field])
    assert canary["alarm_shift"] in (1.5, 2.0, 3.0, 5.0)
    assert canary["alarm_p1"] == pytest.approx(canary["alarm_shift"] * canary["baseline_rate"])
    assert canary["observations_since_change"] > 0
    assert canary["rate_since_change"] == pytest.approx(
        canary["severe_since_change"] / canary["observations_since_change"]
    )
    assert [t["shift"] for t in canary["thresholds"]] == [1.5, 2.0, 3.0, 5.0]
    assert docs[("stable", "turn_severe")]["alarm"] is False
    fresh = docs[("fresh", "turn_severe")]
    assert fresh["armed"] is False and fresh["thresholds"] is None


def test_the_table_says_alarm_and_not_armed(runner: CliRunner, seeded: Path) -> None:
    result = runner.invoke(main, ["detect", "--config", str(seeded), "--assistant", "canary"])
    assert result.exit_code == 0, result.output
    assert "ALARM since" in result.output and "stable" not in result.output
    assert "x shift;" in result.output and " severe, " in result.output
    # Beside ALARM, a stat far below 1.00 is expected: said under the table.
    assert "stat: the highest CUSUM over the shifts, divided by its threshold" in result.output
    assert "ALARM is latched: every CUSUM restarts from 0 when it alarms" in result.output
    out = runner.invoke(main, ["detect", "--config", str(seeded)]).output
    assert "NOT ARMED (50 reference turns)" in out
    quiet = runner.invoke(main, ["detect", "--config", str(seeded), "--assistant", "stable"])
    assert "stat: " in quiet.output and "ALARM is latched" not in quiet.output


def test_an_unmigrated_database_is_a_clear_error(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "casewatch.yaml"
    path.write_text(f"storage:\n  url: sqlite:///{tmp_path / 'empty.db'}\n")
    result = runner.invoke(main, ["detect", "--config", str(path)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
