"""The drift job on a store of cascade draws (SQLite and PostgreSQL): each stored turn weighs
1/π, so a change of the draw probabilities between windows is not reported as drift."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from monitor.config.drift import DriftConfig
from monitor.jobs.drift import DriftJob, windows
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.sampling.cascade import CELLS, CascadePolicy, DrawLedger
from monitor.stats.drift import WindowSamples, analyze
from monitor.storage.drift_queries import latest_results, window_samples
from monitor.storage.store import Store
from tests.fixtures.databases import make_turn
from tests.fixtures.drift import NOW, seed_healthy_and_regressed, verdict_for

RATE = "metric_hallucination_severe_rate"


def _seed_cascade_window(
    store: Store,
    ledger: DrawLedger,
    *,
    start: datetime,
    end: datetime,
    traffic: int,
    risky_probability: float,
    seed: int,
    prefix: str,
) -> int:
    """A window of unchanged traffic (5 % severe: a risky cell of 10 % at 30 %, the rest at
    2.2 %), drawn by the cascade with the risky cell at ``risky_probability`` and the rest at
    0.05; each drawn turn is stored with its probability. Returns the turns stored."""
    rng = random.Random(seed)
    step = (end - start) / traffic
    items = []
    for i in range(traffic):
        risky = rng.random() < 0.1
        bad = rng.random() < (0.3 if risky else 0.2 / 9)
        probability = risky_probability if risky else 0.05
        if rng.random() >= probability:
            continue
        turn = make_turn(
            f"{prefix}-{i}",
            assistant="helpdesk",
            timestamp=(start + step * i).isoformat(),
            case={"subject": "s", "description": "d", "product": "billing" if risky else "vpn"},
        )
        ledger.drawn(turn.event_id, probability, "severe" if risky else "none")
        score = rng.uniform(0.02, 0.25) if bad else rng.uniform(0.87, 1.0)
        items.append((turn, verdict_for(turn, round(score, 4))))
    store.save_many(items)
    return len(items)


def test_a_change_of_draw_probabilities_is_not_drift(store: Store) -> None:
    ledger = DrawLedger(CascadePolicy(CELLS, 100.0, ManualClock()))
    store.draws = ledger
    w = windows(DriftConfig(), NOW)
    reference_n = _seed_cascade_window(
        store, ledger, start=w.reference_start, end=w.reference_end, traffic=10_000,
        risky_probability=0.9, seed=1, prefix="ref",
    )  # fmt: skip
    recent_n = _seed_cascade_window(
        store, ledger, start=w.recent_start, end=w.recent_end, traffic=10_000,
        risky_probability=0.3, seed=2, prefix="rec",
    )  # fmt: skip
    store.draws = None
    # A uniform assistant beside it (no probability stored): the unweighted tests, as before.
    seed_healthy_and_regressed(store, assistant="billing", recent_bad=0.05)

    metrics = Metrics(CollectorRegistry())
    job = DriftJob(DriftConfig(), store, metrics, clock=ManualClock(start=NOW.timestamp()))
    run = job.run_once()

    helpdesk = next(a for a in run.assistants if a.assistant == "helpdesk")
    assert (helpdesk.recent_turns, helpdesk.reference_turns) == (recent_n, reference_n)
    assert helpdesk.detected == []
    rows = {r["signal"]: r for r in latest_results(store, "helpdesk")}
    assert rows[RATE]["test"] == "weighted_two_proportion_z"
    assert rows["input_product"]["test"] == "weighted_chi2"
    # min_turns counts the judged turns; the details carry Kish's effective sizes.
    assert rows[RATE]["recent_n"] == recent_n
    assert 0 < rows[RATE]["details"]["recent_n_eff"] < recent_n
    assert rows[RATE]["details"]["reference_rate"] == pytest.approx(0.05, abs=0.02)
    gauge = metrics.registry.get_sample_value(
        "casewatch_drift_detected", {"assistant": "helpdesk", "signal": "input_product"}
    )
    assert gauge == 0
    billing = {r["signal"]: r for r in latest_results(store, "billing")}
    assert billing[RATE]["test"] in {"two_proportion_z", "fisher_exact"}
    assert billing["score_final"]["test"] == "ks_2samp"
    assert "recent_n_eff" not in billing[RATE]["details"]

    # The same stored turns read without their weights: the judged mix moved, and the
    # unweighted tests would have paged on it.
    def plain(start: datetime, end: datetime) -> WindowSamples:
        rows = window_samples(store, "helpdesk", start, end)
        return WindowSamples.of(replace(t, weight=1.0) for t in rows)

    unweighted = analyze(
        plain(w.recent_start, w.recent_end),
        plain(w.reference_start, w.reference_end),
        DriftConfig(),
    )
    assert {"input_product", RATE} <= {r.signal for r in unweighted if r.detected}


def test_window_rows_carry_each_turns_weight(store: Store) -> None:
    ledger = DrawLedger(CascadePolicy(CELLS, 100.0, ManualClock()))
    store.draws = ledger
    drawn = make_turn("drawn", timestamp=(NOW - timedelta(minutes=5)).isoformat())
    ledger.drawn(drawn.event_id, 0.25, "moderate")
    uniform = make_turn("uniform", timestamp=(NOW - timedelta(minutes=4)).isoformat())
    store.save_many([(drawn, verdict_for(drawn, 0.9)), (uniform, verdict_for(uniform, 0.9))])
    rows = list(window_samples(store, "helpdesk", NOW - timedelta(hours=1), NOW))
    assert sorted(t.weight for t in rows) == [1.0, 4.0]
