"""The label-corrected severe rate from the store: ``casewatch estimate`` and the job's gauges,
on SQLite and PostgreSQL, with a judge that misses half the severe turns."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from monitor.cli import main
from monitor.config.quality_estimate import QualityEstimateConfig
from monitor.jobs.quality_estimate import QualityEstimateJob
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.sampling.cascade import CELLS, CascadePolicy, DrawLedger
from monitor.storage.store import Store
from tests.fixtures.turns import T0, seed_turn

POPULATION = 200
TRUE_RATE = 0.4  # people call i % 5 in {0, 1} severe; the judge only i % 5 == 0 (20 %)


def _severe(event_id: str) -> bool:
    return int(event_id.split("-")[1]) % 5 in (0, 1)


@pytest.fixture
def labelled(store: Store, runner: CliRunner, tmp_path: Path) -> Store:
    return _seed_and_label(store, runner, tmp_path)


def _seed_and_label(
    store: Store,
    runner: CliRunner,
    tmp_path: Path,
    drawn_with: Callable[[int], float] | None = None,
) -> Store:
    """The population, one in five called severe by the judge, and a labelled batch of 80;
    ``drawn_with``: each turn's probability of the cascade's draw for the judge (None: drawn
    uniformly, no probability stored)."""
    ledger = DrawLedger(CascadePolicy(CELLS, 100.0, ManualClock()))
    if drawn_with is not None:
        store.draws = ledger
    for i in range(POPULATION):
        bad = {"hallucination": 0.1} if i % 5 == 0 else None
        if drawn_with is not None:
            ledger.drawn(f"h-{i:03d}", drawn_with(i), "severe" if bad else "none")
        seed_turn(store, f"h-{i:03d}", at=T0 + timedelta(seconds=i), scores=bad)
    out = tmp_path / "batch.jsonl"
    args = ["--assistant", "helpdesk", "--n", "80", "--seed", "5", "--out", str(out)]
    result = runner.invoke(main, ["labels", "export", "--db", store.url, *args])
    assert result.exit_code == 0, result.output
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    for line in lines:
        band = "severe" if _severe(line["event_id"]) else "none"
        line["labeller"] = "ana"
        line["labels"] = {"turn_band": band, "hallucination": band}
    out.write_text("".join(json.dumps(x) + "\n" for x in lines))
    result = runner.invoke(main, ["labels", "import", "--db", store.url, str(out)])
    assert result.exit_code == 0, result.output
    return store


def _estimate(runner: CliRunner, store: Store, *args: str) -> dict[str, Any]:
    result = runner.invoke(main, ["estimate", "--db", store.url, "--assistant", "helpdesk",
                                  "--json", *args])  # fmt: skip
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.output)
    return doc


def test_the_corrected_rate_finds_what_the_judge_misses(runner: CliRunner, labelled: Store) -> None:
    doc = _estimate(runner, labelled)
    assert (doc["signal"], doc["labelled"], doc["population"]) == ("turn_band", 80, 200)
    assert doc["judge_only"]["point"] == pytest.approx(0.2)
    assert doc["judge_only"]["upper"] < TRUE_RATE  # the judge alone is confidently wrong
    assert doc["ppi"]["lower"] <= TRUE_RATE <= doc["ppi"]["upper"]
    ppi_width = doc["ppi"]["upper"] - doc["ppi"]["lower"]
    labels_width = doc["labels_only"]["upper"] - doc["labels_only"]["lower"]
    assert ppi_width < labels_width
    assert _estimate(runner, labelled, "--metric", "hallucination")["signal"] == "hallucination"
    text = runner.invoke(main, ["estimate", "--db", labelled.url, "--assistant", "helpdesk"])
    assert "corrected" in text.output and "judge only" in text.output


def test_the_job_exports_point_and_bounds(labelled: Store) -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry=registry)
    job = QualityEstimateJob(QualityEstimateConfig(), labelled, metrics)
    done = job.run_once()
    assert {q.signal for q in done} == {"turn_band", "hallucination"}

    def value(signal: str, bound: str) -> float | None:
        return registry.get_sample_value(
            "casewatch_quality_estimate",
            {"assistant": "helpdesk", "signal": signal, "bound": bound},
        )

    point, lower, upper = (value("turn_band", b) for b in ("point", "lower", "upper"))
    assert point is not None and lower is not None and upper is not None
    assert lower <= point <= upper
    assert value("turn_band_judge_only", "point") == pytest.approx(0.2)
    assert value("hallucination_labels_only", "upper") is not None
    # The anytime-valid interval beside it: one batch so far, so the same centre, wider.
    anytime = {
        b: registry.get_sample_value(
            "casewatch_quality_estimate_anytime",
            {"assistant": "helpdesk", "signal": "turn_band", "bound": b},
        )
        for b in ("point", "lower", "upper")
    }
    assert anytime["lower"] is not None and anytime["upper"] is not None
    assert anytime["lower"] <= lower and upper <= anytime["upper"]


def test_under_the_cascade_the_judge_only_rate_is_the_traffics(
    store: Store, runner: CliRunner, tmp_path: Path
) -> None:
    """The cascade drew the judge's severe turns at 0.8 and the rest at 0.2: the judged frame
    is 20 % severe by the judge, the traffic it stands for 40 * 1.25 / (40 * 1.25 + 160 * 5)
    (Hajek), which the judge-only gauge of every signal (a metric's and the turn band's) and
    ``casewatch estimate`` say, beside the corrected rate weighted the same way."""
    _seed_and_label(store, runner, tmp_path, lambda i: 0.8 if i % 5 == 0 else 0.2)
    traffic = 40 * 1.25 / (40 * 1.25 + 160 * 5)
    registry = CollectorRegistry()
    QualityEstimateJob(QualityEstimateConfig(), store, Metrics(registry=registry)).run_once()
    for signal in ("turn_band", "hallucination"):
        point = registry.get_sample_value(
            "casewatch_quality_estimate",
            {"assistant": "helpdesk", "signal": f"{signal}_judge_only", "bound": "point"},
        )
        assert point == pytest.approx(traffic), signal
    doc = _estimate(runner, store, "--metric", "hallucination")
    assert doc["judge_only"]["point"] == pytest.approx(traffic)
    assert doc["judge_only"]["lower"] < traffic < doc["judge_only"]["upper"]
    assert doc["judge_only"]["n"] == POPULATION


def test_no_labels_yet_says_what_to_do(runner: CliRunner, store: Store) -> None:
    seed_turn(store, "h-000")
    result = runner.invoke(main, ["estimate", "--db", store.url, "--assistant", "helpdesk"])
    assert result.exit_code == 2
    assert "no labelled batch yet: casewatch labels export" in result.output
