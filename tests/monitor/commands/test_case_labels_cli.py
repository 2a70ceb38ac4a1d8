"""``casewatch labels export/import --cases``, ``agreement --store --cases`` and ``estimate
--cases`` on SQLite and PostgreSQL: a uniform batch of scored cases is drawn and recorded with
each case's version and the judge's bands, people's case bands round-trip through our JSONL and
a Label Studio export, bad rows import nothing, and the estimate reads the case frame."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from monitor.cli import main
from monitor.config.quality_estimate import QualityEstimateConfig
from monitor.jobs.case_estimate import CaseQualityEstimateJob
from monitor.metrics.exporter import Metrics
from monitor.schema.case import CASE_METRICS
from monitor.storage import case_labels as case_sql
from monitor.storage import labels as label_sql
from monitor.storage.store import Store
from tests.support.case_verdicts import JUDGED, store_case

SEVERE = {f"c-{i:02d}" for i in range(0, 20, 4)}  # 5 of 20 cases


@pytest.fixture
def seeded(store: Store) -> Store:
    """20 helpdesk cases of 2 turns each, every fourth one unresolved and severe."""
    for i in range(20):
        cid = f"c-{i:02d}"
        bad = cid in SEVERE
        store_case(store, cid, score=0.1 if bad else 0.95,
                   outcome="unresolved" if bad else "resolved",
                   judged_at=JUDGED + timedelta(minutes=i))  # fmt: skip
    return store


def _run(runner: CliRunner, *args: str, code: int = 0) -> Any:
    result = runner.invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result


def _export(runner: CliRunner, store: Store, out: Path, *extra: str) -> list[dict[str, Any]]:
    _run(runner, "labels", "export", "--cases", "--db", store.url, "--assistant", "helpdesk",
         "--out", str(out), *extra)  # fmt: skip
    return [json.loads(line) for line in out.read_text().splitlines()]


def _label_all(path: Path, lines: list[dict[str, Any]], *, off_first: bool = False) -> None:
    for n, line in enumerate(lines):
        line["labeller"] = "ana"
        judge = "severe" if line["conversation_id"] in SEVERE else "none"
        first_off = off_first and n == 0
        line["labels"] = {"case_band": judge, "resolution": "minor" if first_off else judge}
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_export_draws_a_recorded_uniform_case_batch(
    runner: CliRunner, seeded: Store, tmp_path: Path
) -> None:
    lines = _export(runner, seeded, tmp_path / "a.jsonl", "--n", "8", "--seed", "7")
    assert len(lines) == 8 and all(x["conversation_id"].startswith("c-") for x in lines)
    first = lines[0]
    assert first["version"] == 1 and first["labels"] == {}
    assert [t["turn_index"] for t in first["turns"]] == [0, 1]  # the turns the verdict covered
    assert first["turns"][0]["contexts"][0]["id"] == "kb-1"
    assert "severe" not in json.dumps(lines)  # labellers never see the judge's bands
    (batch,) = case_sql.case_batches(seeded)
    assert (batch["population"], batch["size"], batch["seed"]) == (20, 8, 7)
    items = case_sql.case_batch_items(seeded, [batch["id"]])
    assert {c for (_b, c) in items} == {x["conversation_id"] for x in lines}
    for (_b, c), bands in items.items():
        assert bands["case_band"] == ("severe" if c in SEVERE else "none")
        assert set(bands) == {"case_band", *CASE_METRICS}
    again = _export(runner, seeded, tmp_path / "b.jsonl", "--n", "8", "--seed", "7")
    assert [x["conversation_id"] for x in again] == [x["conversation_id"] for x in lines]
    tasks = json.loads((tmp_path / "a.labelstudio.json").read_text())
    assert [t["data"]["conversation_id"] for t in tasks] == [x["conversation_id"] for x in lines]
    assert "[turn 1] customer:" in tasks[0]["data"]["conversation"]
    config = (tmp_path / "a.labelstudio.xml").read_text()
    assert '<Choices name="case_band" toName="conversation"' in config
    assert '<Choices name="workflow_alignment"' in config
    assert label_sql.batches(seeded) == []  # a case batch is not a turn batch


def test_case_labels_round_trip_into_agreement(
    runner: CliRunner, seeded: Store, tmp_path: Path
) -> None:
    path = tmp_path / "a.jsonl"
    lines = _export(runner, seeded, path, "--n", "12", "--seed", "3")
    _label_all(path, lines, off_first=True)
    out = _run(runner, "labels", "import", "--cases", "--db", seeded.url, str(path)).output
    assert "imported 24 case label(s) on 12 case(s)" in out
    doc = json.loads(
        _run(runner, "agreement", "--store", "--cases", "--db", seeded.url, "--json").output
    )
    human = doc["human"]
    assert human["unit"] == "cases"
    assert human["labelled"] == 12 and human["matched"] == 12
    assert human["metrics"]["case_band"]["accuracy"] == 1.0
    assert human["metrics"]["resolution"]["accuracy"] == pytest.approx(11 / 12)
    text = _run(runner, "agreement", "--store", "--cases", "--db", seeded.url).output
    assert "judge vs human: 12 labelled cases" in text
    # Importing the same file again replaces, never duplicates.
    _run(runner, "labels", "import", "--cases", "--db", seeded.url, str(path))
    (batch,) = case_sql.case_batches(seeded)
    assert len(case_sql.stored_case_labels(seeded, [batch["id"]])) == 24


def test_label_studio_export_of_case_labels_imports(
    runner: CliRunner, seeded: Store, tmp_path: Path
) -> None:
    lines = _export(runner, seeded, tmp_path / "a.jsonl", "--n", "4", "--seed", "1")
    tasks = json.loads((tmp_path / "a.labelstudio.json").read_text())
    for n, task in enumerate(tasks, start=1):
        band = "severe" if task["data"]["conversation_id"] in SEVERE else "none"
        task["id"] = n
        task["annotations"] = [
            {
                "completed_by": {"email": "bo@example.com"},
                "created_at": "2026-03-02T10:00:00Z",
                "result": [
                    {"from_name": "case_band", "value": {"choices": [band]}},
                    {"from_name": "issue_tracking", "value": {"choices": ["minor"]}},
                ],
            }
        ]
    export = tmp_path / "studio-export.json"
    export.write_text(json.dumps(tasks))
    out = _run(runner, "labels", "import", "--cases", "--db", seeded.url, str(export)).output
    assert f"imported 8 case label(s) on {len(lines)} case(s)" in out
    (batch,) = case_sql.case_batches(seeded)
    rows = case_sql.stored_case_labels(seeded, [batch["id"]])
    assert {r["labeller"] for r in rows} == {"bo@example.com"}


def test_bad_case_rows_import_nothing(runner: CliRunner, seeded: Store, tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    lines = _export(runner, seeded, path, "--n", "3", "--seed", "5")
    _label_all(path, lines)
    lines[1]["labels"] = {"hallucination": "severe"}  # a turn metric, not a case one
    lines[2]["conversation_id"] = "c-not-drawn"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = _run(runner, "labels", "import", "--cases", "--db", seeded.url, str(path), code=2)
    assert "2 bad row(s), nothing imported" in out.output
    assert "line 2: unknown metric 'hallucination'" in out.output
    assert "line 3: conversation 'c-not-drawn' is not in batch" in out.output
    (batch,) = case_sql.case_batches(seeded)
    assert case_sql.stored_case_labels(seeded, [batch["id"]]) == []
    # A case file imported without --cases names no turn batch either: nothing stored.
    _run(runner, "labels", "import", "--db", seeded.url, str(path), code=2)


def test_estimate_cases_reads_the_case_frame(
    runner: CliRunner, seeded: Store, tmp_path: Path
) -> None:
    path = tmp_path / "a.jsonl"
    lines = _export(runner, seeded, path, "--n", "10", "--seed", "11")
    _label_all(path, lines)
    _run(runner, "labels", "import", "--cases", "--db", seeded.url, str(path))
    result = _run(runner, "estimate", "--cases", "--db", seeded.url, "--assistant", "helpdesk",
                  "--json")  # fmt: skip
    doc = json.loads(result.stdout)
    assert doc["unit"] == "cases" and doc["signal"] == "case_band"
    assert (doc["population"], doc["labelled"]) == (20, 10)
    assert doc["judge_only"]["point"] == pytest.approx(5 / 20)
    # People agree with the judge on every labelled case: the corrected interval holds the
    # judge's rate, and the judge's bands carry weight.
    assert doc["ppi"]["lower"] <= 5 / 20 <= doc["ppi"]["upper"]
    assert doc["lam"] > 0.0
    assert doc["anytime"]["batches"] == 1
    assert "only n = 10 labelled case(s)" in result.stderr
    text = _run(runner, "estimate", "--cases", "--metric", "resolution", "--db", seeded.url,
                "--assistant", "helpdesk").output  # fmt: skip
    assert "share of cases with resolution severe" in text
    wrong = _run(runner, "estimate", "--metric", "resolution", "--db", seeded.url,
                 "--assistant", "helpdesk", code=2)  # fmt: skip
    assert "is a case metric: add --cases" in wrong.output


def test_case_frame_stays_put_when_a_case_resumes(seeded: Store) -> None:
    """A case judged again after a batch's frame end does not change that frame."""
    end = JUDGED + timedelta(hours=1)
    before = case_sql.case_frame(seeded, "helpdesk", None, end)
    store_case(seeded, "c-01", score=0.1, outcome="unresolved", version=2,
               judged_at=end + timedelta(minutes=5), with_turns=False)  # fmt: skip
    assert case_sql.case_frame(seeded, "helpdesk", None, end) == before
    now = {r.conversation_id: r for r in case_sql.case_frame(seeded, "helpdesk")}
    assert (now["c-01"].version, now["c-01"].bands["case_band"]) == (2, "severe")
    since = case_sql.case_frame(seeded, "helpdesk", JUDGED + timedelta(minutes=10), end)
    assert [r.conversation_id for r in since] == [f"c-{i:02d}" for i in range(10, 20)]


def test_the_case_estimate_job_exports_the_newest_labelled_case_batch(
    runner: CliRunner, seeded: Store, tmp_path: Path
) -> None:
    metrics = Metrics(CollectorRegistry())
    job = CaseQualityEstimateJob(QualityEstimateConfig(), seeded, metrics)
    assert job.run_once() == []  # no case batch labelled yet: nothing exported
    path = tmp_path / "a.jsonl"
    _label_all(path, _export(runner, seeded, path, "--n", "10", "--seed", "11"))
    _run(runner, "labels", "import", "--cases", "--db", seeded.url, str(path))
    done = job.run_once()
    assert {q.signal for q in done} == {"case_band", "resolution"}
    gauge = "casewatch_quality_estimate"
    judge = metrics.registry.get_sample_value(
        gauge, {"assistant": "helpdesk", "signal": "case_band_judge_only", "bound": "point"}
    )
    assert judge == pytest.approx(5 / 20)
    for signal in ("case_band", "case_resolution"):
        labels = {"assistant": "helpdesk", "signal": signal, "bound": "point"}
        assert metrics.registry.get_sample_value(gauge, labels) is not None
        assert metrics.registry.get_sample_value(f"{gauge}_anytime", labels) is not None
