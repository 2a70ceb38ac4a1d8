"""``casewatch inspect`` through click on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from monitor.cli import main
from monitor.storage.store import Store
from tests.fixtures.turns import seed_mixed


@pytest.fixture
def seeded(store: Store) -> str:
    seed_mixed(store)
    return store.url


def _run(runner: CliRunner, *args: str, code: int = 0) -> Any:
    result = runner.invoke(main, ["inspect", *args], catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result


def test_turns_are_listed_newest_first_with_worst_metrics(runner: CliRunner, seeded: str) -> None:
    doc = json.loads(
        _run(runner, "turns", "--db", seeded, "--assistant", "helpdesk", "--json").output
    )
    assert [d["event_id"] for d in doc] == ["h-ok-3", "h-failed", "h-bad", "h-ok-2", "h-ok-1"]
    bad = doc[2]
    assert bad["turn_band"] == "severe"
    assert bad["worst"][0]["metric"] == "hallucination"
    assert bad["worst"][0]["band"] == "severe"
    # The lowest-scoring judge's reason, first line only.
    assert bad["worst"][0]["justification"] == (
        "a on hallucination: the answer cites error 0x81 but the evidence says 0x80."
    )
    assert doc[1]["status"] == "judge_failed"
    assert doc[1]["failure_reason"] == "invalid_output"
    assert doc[0]["worst"] == []  # nothing worse than "none" to show


def test_filters_by_metric_band_and_time(runner: CliRunner, seeded: str) -> None:
    doc = json.loads(_run(runner, "turns", "--db", seeded, "--metric", "hallucination",
                          "--band", "severe", "--json").output)  # fmt: skip
    assert [d["event_id"] for d in doc] == ["h-bad"]
    doc = json.loads(_run(runner, "turns", "--db", seeded, "--since", "2026-03-01T12:05:00Z",
                          "--until", "2026-03-01T12:06:30Z", "--json").output)  # fmt: skip
    assert [d["event_id"] for d in doc] == ["b-ok-2", "b-ok-1"]
    doc = json.loads(_run(runner, "turns", "--db", seeded, "--limit", "2", "--json").output)
    assert len(doc) == 2


def test_text_listing_is_plain_when_not_a_tty(runner: CliRunner, seeded: str) -> None:
    out = _run(runner, "turns", "--db", seeded, "--band", "severe").output
    assert "\x1b[" not in out
    assert "h-bad  helpdesk  severe" in out
    assert "hallucination severe 0.20: a on hallucination: the answer cites" in out
    assert "casewatch inspect turn EVENT_ID" in out


def test_one_turn_in_full(runner: CliRunner, seeded: str) -> None:
    doc = json.loads(_run(runner, "turn", "h-bad", "--db", seeded, "--json").output)
    assert doc["query"] == "Why does my VPN drop?"
    assert doc["contexts"][0]["id"] == "kb-1"
    assert [j["judge"] for j in doc["judgments"]] == ["a", "b", "arbiter"]
    assert doc["arbitration"]["arbitrated"] is True
    assert doc["arbitration"]["arbiters"] == ["arbiter"]
    assert doc["arbitration"]["disagreements"] == [
        {"metric": "hallucination", "bands": {"a": "severe", "b": "minor"}}
    ]
    assert doc["verdict"]["metric_bands"]["hallucination"] == "severe"
    assert doc["cost_usd"] == pytest.approx(0.006)
    assert doc["latency_seconds"] == pytest.approx(1.5)
    text = _run(runner, "turn", "h-bad", "--db", seeded).output
    for fence in ("── case", "── query", "── contexts (1)", "── answer", "── judge arbiter",
                  "── arbitration", "── tripwire", "── cost"):  # fmt: skip
        assert fence in text
    assert "Second line of detail." in text  # the full justification, not just its first line
    assert max(len(line) for line in text.splitlines()) <= 100
    # The verdict line's words are explained under it.
    legend = " ".join(text.split())
    assert "(S_final: the weighted mean of the metric scores" in legend
    assert "The turn band is the worse of that band and the worst band among" in legend


def test_a_turn_from_spans_without_a_case_says_which_setting_gives_one(
    runner: CliRunner, seeded: str
) -> None:
    from monitor.reports.turn_view import render_detail

    doc = json.loads(_run(runner, "turn", "h-bad", "--db", seeded, "--json").output)
    spans = {**doc, "event_id": "otel-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"}
    text = " ".join(render_detail({**spans, "case": {}}, width=100, color=False).split())
    assert "no span attribute gave a case; set assembly.case_attributes" in text
    plain = " ".join(render_detail({**doc, "case": {}}, width=100, color=False).split())
    assert "(no case given with this turn)" in plain and "case_attributes" not in plain


def test_json_is_stable(runner: CliRunner, seeded: str) -> None:
    first = _run(runner, "turn", "h-bad", "--db", seeded, "--json").output
    assert first == _run(runner, "turn", "h-bad", "--db", seeded, "--json").output
    assert list(json.loads(first)) == sorted(json.loads(first))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["turn", "nope"], "no stored turn has event id 'nope'"),
        (
            ["turns", "--assistant", "ghost"],
            "unknown assistant 'ghost'; the store has: billing, helpdesk",
        ),
        (["turns", "--since", "yesterday"], "--since 'yesterday' is neither"),
        (["turns", "--metric", "politeness"], "Invalid value for '--metric'"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_2(
    runner: CliRunner, seeded: str, args: list[str], message: str
) -> None:
    result = runner.invoke(main, ["inspect", *args, "--db", seeded])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_empty_and_unmigrated_databases_say_what_to_run(
    runner: CliRunner, db_url: str, tmp_path: Path
) -> None:
    empty = Store(db_url)
    assert empty.revision() is None  # connects: SQLite creates the (empty) file
    empty.close()
    result = runner.invoke(main, ["inspect", "turns", "--db", db_url])
    assert result.exit_code == 2
    assert f"casewatch db upgrade --db {shlex.quote(db_url)}`" in result.output
    store = Store(db_url)
    store.migrate()
    store.close()
    result = runner.invoke(main, ["inspect", "turns", "--db", db_url])
    assert result.exit_code == 2
    assert "holds no judged turn yet" in result.output
    result = runner.invoke(main, ["inspect", "turns", "--db", str(tmp_path / "missing.db")])
    assert result.exit_code == 2
    assert "no database at" in result.output
