"""``casewatch labels export/import`` and ``agreement --store`` on SQLite and PostgreSQL:
labels round-trip through our JSONL and a Label Studio export; bad rows import nothing."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from monitor.cli import main
from monitor.stats.agreement import BANDS
from monitor.storage import labels as label_sql
from monitor.storage.store import Store
from tests.fixtures.turns import T0, seed_turn


@pytest.fixture
def seeded(store: Store) -> Store:
    """30 helpdesk turns, every third one a severe hallucination; one billing turn."""
    for i in range(30):
        bad = {"hallucination": 0.1} if i % 3 == 0 else None
        seed_turn(store, f"h-{i:02d}", at=T0 + timedelta(minutes=i), scores=bad)
    seed_turn(store, "b-0", assistant="billing", at=T0)
    return store


def _run(runner: CliRunner, *args: str, code: int = 0) -> Any:
    result = runner.invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result


def _export(runner: CliRunner, store: Store, out: Path, *extra: str) -> list[dict[str, Any]]:
    _run(runner, "labels", "export", "--db", store.url, "--assistant", "helpdesk",
         "--out", str(out), *extra)  # fmt: skip
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_export_draws_a_recorded_uniform_batch(
    runner: CliRunner, seeded: Store, tmp_path: Path
) -> None:
    lines = _export(runner, seeded, tmp_path / "a.jsonl", "--n", "10", "--seed", "7")
    assert len(lines) == 10
    assert all(line["event_id"].startswith("h-") for line in lines)
    assert lines[0]["query"] == "Why does my VPN drop?" and lines[0]["labels"] == {}
    assert "hallucination" not in json.dumps(lines[0])  # labellers never see the judge's bands
    (batch,) = label_sql.batches(seeded)
    assert (batch["population"], batch["size"], batch["seed"]) == (30, 10, 7)
    again = _export(runner, seeded, tmp_path / "b.jsonl", "--n", "10", "--seed", "7")
    assert [x["event_id"] for x in again] == [x["event_id"] for x in lines]  # same frame + seed
    tasks = json.loads((tmp_path / "a.labelstudio.json").read_text())
    assert [t["data"]["event_id"] for t in tasks] == [x["event_id"] for x in lines]
    config = (tmp_path / "a.labelstudio.xml").read_text()
    assert '<Choices name="hallucination" toName="answer"' in config
    assert '<Choices name="turn_band"' in config


def test_jsonl_labels_round_trip_into_agreement(
    runner: CliRunner, seeded: Store, tmp_path: Path
) -> None:
    lines = _export(runner, seeded, tmp_path / "a.jsonl", "--n", "12", "--seed", "3")
    bad = {f"h-{i:02d}" for i in range(0, 30, 3)}
    for n, line in enumerate(lines):
        line["labeller"] = "ana"
        judge = "severe" if line["event_id"] in bad else "none"
        # People agree with the judge except on the first turn.
        line["labels"] = {"hallucination": judge if n else "minor", "turn_band": judge}
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = _run(runner, "labels", "import", "--db", seeded.url, str(tmp_path / "a.jsonl")).output
    assert "imported 24 label(s) on 12 turn(s)" in out
    doc = json.loads(_run(runner, "agreement", "--store", "--db", seeded.url, "--json").output)
    human = doc["human"]
    assert human["labelled"] == 12 and human["matched"] == 12
    assert human["metrics"]["turn_band"]["accuracy"] == 1.0
    assert human["metrics"]["hallucination"]["accuracy"] == pytest.approx(11 / 12)
    # Importing the same file again replaces, never duplicates.
    _run(runner, "labels", "import", "--db", seeded.url, str(tmp_path / "a.jsonl"))
    assert len(label_sql.stored_labels(seeded, [lines[0]["batch_id"]])) == 24
    text = _run(runner, "agreement", "--store", "--db", seeded.url,
                "--batch", lines[0]["batch_id"]).output  # fmt: skip
    assert "judge vs human: 12 labelled turns" in text
    # Each label's confusion matrix is a table: a row per human band, a column per judge band.
    lines = text.splitlines()
    start = lines.index(
        "hallucination: confusion (rows: human band, columns: judge band; right of the "
        "diagonal the judge was milder)"
    )
    head, _, *rows = lines[start + 1 : start + 7]
    assert head.split() == ["hallucination", "judge", "severe", "judge", "moderate", "judge",
                            "minor", "judge", "none"]  # fmt: skip
    assert [r.split()[:2] for r in rows] == [["human", b] for b in BANDS]
    assert sum(int(x) for r in rows for x in r.split()[2:]) == 12
    assert sum(int(x) for x in rows[2].split()[2:]) == 1  # the one turn people called minor


def test_label_studio_export_round_trips(runner: CliRunner, seeded: Store, tmp_path: Path) -> None:
    _export(runner, seeded, tmp_path / "a.jsonl", "--n", "5", "--seed", "11")
    tasks = json.loads((tmp_path / "a.labelstudio.json").read_text())
    # What Label Studio's "JSON" export adds to each imported task.
    for i, task in enumerate(tasks):
        task["id"] = 100 + i
        task["annotations"] = [
            {
                "id": 1000 + i,
                "completed_by": {"id": 1, "email": "bo@example.com"},
                "created_at": "2026-03-02T09:00:00.000000Z",
                "was_cancelled": False,
                "result": [
                    {
                        "from_name": "hallucination",
                        "to_name": "answer",
                        "type": "choices",
                        "value": {"choices": ["moderate"]},
                    },
                    {
                        "from_name": "turn_band",
                        "to_name": "answer",
                        "type": "choices",
                        "value": {"choices": ["minor"]},
                    },
                ],
            }
        ]
    export = tmp_path / "project-1-at-2026-03-02.json"
    export.write_text(json.dumps(tasks))
    out = _run(runner, "labels", "import", "--db", seeded.url, str(export)).output
    assert "imported 10 label(s) on 5 turn(s)" in out
    stored = label_sql.stored_labels(seeded, [tasks[0]["data"]["batch_id"]])
    assert {(r["metric"], r["band"], r["labeller"]) for r in stored} == {
        ("hallucination", "moderate", "bo@example.com"),
        ("turn_band", "minor", "bo@example.com"),
    }
    assert stored[0]["labelled_at"].isoformat() == "2026-03-02T09:00:00+00:00"


def test_bad_rows_are_listed_and_nothing_is_imported(
    runner: CliRunner, seeded: Store, tmp_path: Path
) -> None:
    lines = _export(runner, seeded, tmp_path / "a.jsonl", "--n", "4", "--seed", "1")
    for line in lines:
        line["labels"] = {"hallucination": "none"}
    lines[1]["labels"] = {"halucination": "none"}
    lines[2]["labels"] = {"hallucination": "terrible"}
    lines[3]["event_id"] = "h-not-drawn"
    body = "".join(json.dumps(x) + "\n" for x in lines) + "{not json\n"
    (tmp_path / "a.jsonl").write_text(body)
    result = runner.invoke(main, ["labels", "import", "--db", seeded.url, str(tmp_path / "a.jsonl"),
                                  "--labeller", "ana"])  # fmt: skip
    assert result.exit_code == 2
    assert "4 bad row(s), nothing imported" in result.output
    assert "line 2: unknown metric 'halucination'" in result.output
    assert "line 3: hallucination: band 'terrible' is not one of severe" in result.output
    assert "line 4: event 'h-not-drawn' is not in batch" in result.output
    assert "line 5:" in result.output
    assert "Traceback" not in result.output
    assert label_sql.stored_labels(seeded, [lines[0]["batch_id"]]) == []
    result = runner.invoke(main, ["agreement", "--store", "--db", seeded.url])
    assert result.exit_code == 2 and "no human labels stored yet" in result.output
    result = runner.invoke(main, ["agreement", "--store", "--db", seeded.url, "--batch", "nope"])
    assert result.exit_code == 2 and "unknown labelling batch 'nope'" in result.output


def test_export_of_an_unknown_assistant_exits_2(
    runner: CliRunner, seeded: Store, tmp_path: Path
) -> None:
    result = runner.invoke(main, ["labels", "export", "--db", seeded.url, "--assistant", "ghost",
                                  "--out", str(tmp_path / "x.jsonl")])  # fmt: skip
    assert result.exit_code == 2 and "unknown assistant 'ghost'" in result.output
    assert not (tmp_path / "x.jsonl").exists()


def test_a_partly_labelled_batch_imports_its_labelled_rows_and_reports_the_rest(
    runner: CliRunner, seeded: Store, tmp_path: Path
) -> None:
    lines = _export(runner, seeded, tmp_path / "a.jsonl", "--n", "10", "--seed", "5")
    for line in lines[:6]:  # labelled in the exported order, then the labeller stopped
        line["labeller"] = "ana"
        line["labels"] = {"turn_band": "none"}
    lines[6]["labels"] = {"turn_band": None}  # a field left empty is not a label either
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    result = _run(runner, "labels", "import", "--db", seeded.url, str(tmp_path / "a.jsonl"))
    assert "imported 6 label(s) on 6 turn(s)" in result.output
    assert "4 turn(s) not labelled yet were left out (first: line 7)" in result.output
    assert "random sample" in result.output
    assert len(label_sql.stored_labels(seeded, [lines[0]["batch_id"]])) == 6

    # The estimate from those 6 says n, and that it is too few to mean much.
    est = runner.invoke(main, ["estimate", "--db", seeded.url, "--assistant", "helpdesk"])
    assert est.exit_code == 0, est.output
    assert "warning: only n = 6 labelled turn(s)" in est.output
    assert "The anytime interval is wider than the others because it stays valid" in est.output
    # A labelled row still needs its labeller: that one is bad, and nothing is imported.
    lines[7]["labels"] = {"turn_band": "minor"}
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    bad = runner.invoke(main, ["labels", "import", "--db", seeded.url, str(tmp_path / "b.jsonl")])
    assert bad.exit_code == 2 and "line 8: no labeller" in bad.output
