"""``casewatch drift`` through click on a seeded SQLite store (read-only analysis, once)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from monitor.cli import main
from monitor.storage.drift_queries import latest_results
from monitor.storage.store import Store
from tests.fixtures.drift import NOW, seed_healthy_and_regressed

AT = NOW.isoformat()


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    """helpdesk regressed (5 % -> 50 % severe), billing healthy (5 % -> 5 %); returns a config."""
    url = f"sqlite:///{tmp_path / 'casewatch.db'}"
    store = Store(url)
    store.migrate()
    seed_healthy_and_regressed(store, assistant="helpdesk", recent_bad=0.5)
    seed_healthy_and_regressed(store, assistant="billing", recent_bad=0.05)
    store.close()
    config = tmp_path / "casewatch.yaml"
    config.write_text(f"storage:\n  url: {url}\n")
    return config


def _run(runner: CliRunner, *args: str) -> Any:
    result = runner.invoke(main, ["drift", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def _signals(doc: dict[str, Any], assistant: str) -> dict[str, dict[str, Any]]:
    (entry,) = [a for a in doc["assistants"] if a["assistant"] == assistant]
    return {s["signal"]: s for s in entry["signals"]}


def test_regressed_window_is_detected_and_a_healthy_one_is_not(
    runner: CliRunner, seeded: Path
) -> None:
    doc = json.loads(_run(runner, "--config", str(seeded), "--at", AT, "--json").output)
    assert [a["assistant"] for a in doc["assistants"]] == ["billing", "helpdesk"]
    helpdesk = _signals(doc, "helpdesk")
    assert helpdesk["score_final"]["detected"] is True
    assert helpdesk["score_final"]["shift"] < 0  # worse
    assert helpdesk["band_shares"]["detected"] is True
    assert helpdesk["metric_hallucination_severe_rate"]["detected"] is True
    assert helpdesk["input_product"]["detected"] is False  # the inputs did not move
    billing = _signals(doc, "billing")
    assert not any(s["detected"] for s in billing.values())
    assert {s["status"] for s in billing.values()} == {"ok"}
    assert doc["windows"]["recent"] == [(NOW - timedelta(hours=1)).isoformat(), AT]


def test_the_table_names_the_drifted_signals(runner: CliRunner, seeded: Path) -> None:
    out = _run(runner, "--config", str(seeded), "--at", AT, "--assistant", "helpdesk").output
    assert "helpdesk: recent 80 turns, reference 300 turns; drift detected: score_final" in out
    line = next(x for x in out.splitlines() if x.startswith("score_final "))
    assert line.endswith("DRIFT") and "ks_2samp" in line
    assert "billing" not in out


def test_too_few_turns_is_insufficient_data(runner: CliRunner, seeded: Path) -> None:
    config = seeded.with_name("strict.yaml")
    config.write_text(seeded.read_text() + "drift:\n  min_turns: 81\n")
    doc = json.loads(_run(runner, "--config", str(config), "--at", AT, "--json").output)
    signals = _signals(doc, "helpdesk")
    assert {s["status"] for s in signals.values()} == {"insufficient_data"}
    assert not any(s["detected"] for s in signals.values())
    assert signals["score_final"]["p_value"] is None
    out = _run(runner, "--config", str(config), "--at", AT).output
    assert "insufficient_data" in out and "DRIFT" not in out
    assert "recent window has 80 sample(s), fewer than min_turns=81" in out


def test_an_unknown_assistant_or_an_empty_period_says_so(runner: CliRunner, seeded: Path) -> None:
    doc = json.loads(
        _run(runner, "--config", str(seeded), "--at", AT, "--assistant", "nobody", "--json").output
    )
    (entry,) = doc["assistants"]
    assert (entry["recent_turns"], entry["reference_turns"]) == (0, 0)
    assert {s["status"] for s in entry["signals"]} == {"insufficient_data"}
    out = _run(runner, "--config", str(seeded), "--at", "2020-01-01T00:00:00Z").output
    assert "no turns in either window" in out


def test_the_cli_writes_nothing(runner: CliRunner, seeded: Path, tmp_path: Path) -> None:
    _run(runner, "--config", str(seeded), "--at", AT)
    store = Store(f"sqlite:///{tmp_path / 'casewatch.db'}")
    assert latest_results(store) == []
    store.close()


@pytest.mark.parametrize(
    ("yaml", "args", "needle"),
    [
        (
            "drift:\n  reference_period:\n"
            "    {start: 2026-03-08T00:00:00Z, end: 2026-03-01T00:00:00Z}\n",
            [],
            "must be after start",
        ),
        ("", ["--at", "yesterday"], "--at 'yesterday' is not an ISO 8601 time"),
        ("", ["--config", "/nonexistent/casewatch.yaml"], "does not exist"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(
    runner: CliRunner, seeded: Path, yaml: str, args: list[str], needle: str
) -> None:
    config = seeded.with_name("bad.yaml")
    config.write_text(seeded.read_text() + yaml)
    result = runner.invoke(main, ["drift", "--config", str(config), *args])
    assert result.exit_code == 2
    assert needle in result.output
    assert "Traceback" not in result.output


def test_an_unmigrated_database_points_at_db_upgrade(runner: CliRunner, tmp_path: Path) -> None:
    config = tmp_path / "empty.yaml"
    (tmp_path / "empty.db").touch()  # there, but never migrated
    config.write_text(f"storage:\n  url: sqlite:///{tmp_path / 'empty.db'}\n")
    result = runner.invoke(main, ["drift", "--config", str(config), "--at", AT])
    assert result.exit_code == 2
    assert "casewatch db upgrade" in result.output


def test_a_missing_database_says_what_to_run_and_creates_nothing(
    runner: CliRunner, tmp_path: Path
) -> None:
    # `casewatch drift` where no daemon ran created an empty casewatch.db.
    db = tmp_path / "casewatch.db"
    config = tmp_path / "c.yaml"
    config.write_text(f"storage:\n  url: sqlite:///{db}\n")
    result = runner.invoke(main, ["drift", "--config", str(config)])
    assert result.exit_code == 2
    assert f"no database at {db}" in result.output
    assert "casewatch run" in result.output and "storage.url" in result.output
    assert not db.exists()
