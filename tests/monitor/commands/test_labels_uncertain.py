"""``casewatch labels export --strategy uncertain`` and what follows: turns the judge is unsure
of are drawn more often, each with its probability recorded and exported; an import whose rows
lack it is refused; the estimate weights by it and stays near the true rate; ``casewatch
estimate`` prints the anytime-valid interval beside the fixed-n one. Bad input: no judged turn,
or no uncertainty signal, exits 2."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from monitor.cli import main
from monitor.storage import labels as label_sql
from monitor.storage.store import Store
from tests.fixtures.turns import T0, seed_turn

POPULATION = 300
TRUE_RATE = 0.4  # people call i % 5 in {0, 1} severe


def _judge_scores(i: int) -> dict[str, float] | None:
    if i % 5 == 0:
        return {"hallucination": 0.1}  # severe, and the judge says so
    if i % 5 == 1:
        return {"hallucination": 0.36}  # severe to people; the judge says moderate, near the edge
    return None  # clean, far from the edge


@pytest.fixture
def judged(store: Store) -> Store:
    for i in range(POPULATION):
        seed_turn(store, f"u-{i:03d}", at=T0 + timedelta(seconds=i), scores=_judge_scores(i))
    return store


def _export(runner: CliRunner, store: Store, out: Path, *extra: str) -> Any:
    args = ["--assistant", "helpdesk", "--out", str(out), "--strategy", "uncertain", *extra]
    return runner.invoke(main, ["labels", "export", "--db", store.url, *args])


def _label(out: Path, keep_probability: bool = True) -> None:
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    for line in lines:
        severe = int(line["event_id"].split("-")[1]) % 5 in (0, 1)
        line["labeller"] = "ana"
        line["labels"] = {"turn_band": "severe" if severe else "none"}
        if not keep_probability:
            line.pop("inclusion_probability")
    out.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_unsure_turns_are_drawn_more_often_with_their_probability_recorded(
    runner: CliRunner, judged: Store, tmp_path: Path
) -> None:
    out = tmp_path / "batch.jsonl"
    result = _export(runner, judged, out, "--n", "60", "--seed", "3")
    assert result.exit_code == 0, result.output
    assert "(uncertain, seed 3)" in result.output
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    probability = {r["event_id"]: r["inclusion_probability"] for r in rows}
    assert all(0 < p <= 1 for p in probability.values())
    near = [p for e, p in probability.items() if int(e.split("-")[1]) % 5 == 1]
    far = [p for e, p in probability.items() if int(e.split("-")[1]) % 5 >= 2]
    assert near and far and min(near) > max(far)  # the edge turns are favoured
    tasks = json.loads(out.with_name("batch.labelstudio.json").read_text())
    assert all("inclusion_probability" in t["data"] for t in tasks)
    [batch] = label_sql.batches(judged, "helpdesk")
    assert batch["strategy"] == "uncertain"
    stored = label_sql.item_probabilities(judged, [batch["id"]])
    assert {e: p for (_b, e), p in stored.items()} == probability


def test_an_import_without_the_probability_of_the_draw_is_refused(
    runner: CliRunner, judged: Store, tmp_path: Path
) -> None:
    out = tmp_path / "batch.jsonl"
    assert _export(runner, judged, out, "--n", "40", "--seed", "4").exit_code == 0
    _label(out, keep_probability=False)
    result = runner.invoke(main, ["labels", "import", "--db", judged.url, str(out)])
    assert result.exit_code == 2
    assert "no inclusion_probability" in result.output and "nothing imported" in result.output
    [batch] = label_sql.batches(judged, "helpdesk")
    assert label_sql.stored_labels(judged, [batch["id"]]) == []


def test_the_weighted_estimate_stays_near_the_true_rate_and_prints_both_intervals(
    runner: CliRunner, judged: Store, tmp_path: Path
) -> None:
    out = tmp_path / "batch.jsonl"
    assert _export(runner, judged, out, "--n", "60", "--seed", "5").exit_code == 0
    _label(out)
    result = runner.invoke(main, ["labels", "import", "--db", judged.url, str(out)])
    assert result.exit_code == 0, result.output
    args = ["estimate", "--db", judged.url, "--assistant", "helpdesk"]
    doc = json.loads(runner.invoke(main, [*args, "--json"]).output)
    assert doc["strategy"] == "uncertain"
    assert doc["judge_only"]["point"] == pytest.approx(0.2)  # the judge misses half
    assert abs(doc["ppi"]["point"] - TRUE_RATE) < 0.1
    assert doc["ppi"]["lower"] <= TRUE_RATE <= doc["ppi"]["upper"]
    anytime = doc["anytime"]
    assert anytime["batches"] == 1
    assert anytime["lower"] <= doc["ppi"]["point"] <= anytime["upper"]
    text = runner.invoke(main, args).output
    assert "anytime" in text and "valid at every look" in text
    assert "Read a dashboard" in text and "weighted by 1 / their probability" in text


def test_no_uncertainty_signal_exits_2(runner: CliRunner, store: Store, tmp_path: Path) -> None:
    for i in range(20):
        seed_turn(store, f"c-{i}", at=T0 + timedelta(seconds=i))  # all clean, far from the edge
    result = _export(runner, store, tmp_path / "b.jsonl", "--n", "5")
    assert result.exit_code == 2
    assert "no scored turn in this time range carries an uncertainty signal" in result.output
    assert label_sql.batches(store) == []
    assert not (tmp_path / "b.jsonl").exists()


def test_no_judged_turn_exits_2(runner: CliRunner, store: Store, tmp_path: Path) -> None:
    seed_turn(store, "f-1", failed=True)
    result = _export(runner, store, tmp_path / "b.jsonl")
    assert result.exit_code == 2
    assert "no scored turn" in result.output
