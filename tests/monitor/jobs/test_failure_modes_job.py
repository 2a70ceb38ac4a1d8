"""The failure-modes job on a real store (SQLite and PostgreSQL): modes read back from stored
verdicts, ids kept across runs, a mode planted after the others surfaced as emerging, too few
failed turns said and counted, and a run whose lease lapsed saving nothing."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from prometheus_client import CollectorRegistry

from monitor.config.failure_modes import FailureModesConfig
from monitor.errors import LeaseLost
from monitor.jobs.failure_modes import FailureModesJob
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.storage.failure_modes import latest_runs, list_modes, mode_turns
from monitor.storage.leases import Leases
from monitor.storage.store import Store
from monitor.storage.tables import failure_mode_members
from tests.support.planted_failures import planted_turn, planted_turns
from tests.support.stored_failures import store_failed

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
WEEK_AGO = NOW - timedelta(days=7)
POLICY = 6  # "policy fabricated": fails hallucination, a critical metric, so the turn is severe


def _value(m: Metrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, {"unit": "turn", **labels})  # the turns' modes


def _job(store: Store, clock: ManualClock, **kw: object) -> tuple[FailureModesJob, Metrics]:
    metrics = Metrics(CollectorRegistry())
    job = FailureModesJob(FailureModesConfig(), store, metrics, clock=clock, **kw)  # type: ignore[arg-type]
    return job, metrics


def test_modes_are_found_kept_and_a_later_mode_is_surfaced_as_emerging(store: Store) -> None:
    turns, _ = planted_turns(
        240, 3, noise=0.0, seed=21, start=WEEK_AGO + timedelta(hours=2), span=timedelta(days=6.8)
    )
    store_failed(store, turns, "canary")
    clock = ManualClock(start=NOW.timestamp())
    job, metrics = _job(store, clock)

    (first,) = job.run_once()

    assert first.grouping.status == "grouped" and len(first.grouping.modes) == 3
    assert _value(metrics, "casewatch_failure_modes", assistant="canary") == 3
    assert _value(metrics, "casewatch_failure_modes_emerging", assistant="canary") == 0
    sizes = [_value(metrics, "casewatch_failure_mode_turns", assistant="canary", rank=str(r))
             for r in range(1, 6)]  # fmt: skip
    assert sizes[:3] == sorted((m.size for m in first.grouping.modes), reverse=True)
    assert sizes[3:] == [0, 0]
    grouped = _value(metrics, "casewatch_failure_mode_window_turns", assistant="canary",
                     outcome="grouped")  # fmt: skip
    assert grouped == 240
    modes = list_modes(store, "canary")
    assert [m.mode_id for m in modes] == [m.mode_id for m in first.grouping.modes]

    # A cause that was not there before: 30 turns in the last hours.
    rng = random.Random(22)
    late = [planted_turn(POLICY, rng, NOW + timedelta(minutes=10 + i), f"late-{i}")
            for i in range(30)]  # fmt: skip
    store_failed(store, late, "canary")
    clock.advance(3600)
    (second,) = job.run_once()

    ids = {m.mode_id for m in first.grouping.modes}
    assert ids <= {m.mode_id for m in second.grouping.modes}
    (fresh,) = [m for m in second.grouping.modes if m.mode_id not in ids]
    assert fresh.new and fresh.size == 30 and "hallucination" in fresh.metrics
    assert _value(metrics, "casewatch_failure_modes_emerging", assistant="canary") == 1
    assert _value(metrics, "casewatch_failure_mode_runs_total", assistant="canary",
                  outcome="grouped") == 2  # fmt: skip
    shown = mode_turns(store, "canary", fresh.mode_id, limit=5)
    assert [t.event_id for t in shown] == [f"late-{i}" for i in range(29, 24, -1)]
    assert all("hallucination" in t.reasons for t in shown)
    (run,) = latest_runs(store, "canary")
    assert run["modes"] == 4 and run["emerging"] == 1 and run["turns"] == 270


def test_too_few_failed_turns_group_nothing_and_say_so(store: Store) -> None:
    turns, _ = planted_turns(12, 2, noise=0.0, seed=23, start=WEEK_AGO, span=timedelta(days=6))
    store_failed(store, turns, "small")
    job, metrics = _job(store, ManualClock(start=NOW.timestamp()))
    (result,) = job.run_once()
    assert result.grouping.status == "too_few_turns" and result.grouping.modes == ()
    assert _value(metrics, "casewatch_failure_mode_runs_total", assistant="small",
                  outcome="too_few_turns") == 1  # fmt: skip
    assert _value(metrics, "casewatch_failure_mode_runs_total", assistant="small",
                  outcome="grouped") == 0  # fmt: skip
    (run,) = latest_runs(store, "small")
    assert run["status"] == "too_few_turns" and "fewer than the 30" in run["note"]
    assert list_modes(store, "small") == []


def test_a_run_whose_lease_lapsed_saves_nothing(store: Store) -> None:
    turns, _ = planted_turns(60, 2, noise=0.0, seed=24, start=WEEK_AGO, span=timedelta(days=6))
    store_failed(store, turns, "canary")
    Leases(store).acquire("failure_modes", "other-replica", NOW, 60)
    job, _ = _job(store, ManualClock(start=NOW.timestamp()), lease_owner="this-replica")
    with pytest.raises(LeaseLost):
        job.run_once()
    assert list_modes(store, "canary") == []
    with store.transaction(write=False) as conn:
        assert conn.scalar(sa.select(sa.func.count()).select_from(failure_mode_members)) == 0


def test_failed_turns_past_the_cap_are_counted_not_read(store: Store) -> None:
    turns, _ = planted_turns(130, 2, noise=0.0, seed=25, start=WEEK_AGO + timedelta(hours=2),
                             span=timedelta(days=6))  # fmt: skip
    store_failed(store, turns, "canary")
    metrics = Metrics(CollectorRegistry())
    job = FailureModesJob(FailureModesConfig(max_turns=100), store, metrics,
                          clock=ManualClock(start=NOW.timestamp()))  # fmt: skip
    (result,) = job.run_once()
    assert result.grouping.turns == 100 and result.over_cap == 30
    newest = {t.event_id for t in sorted(turns, key=lambda t: t.at)[-100:]}
    assert {e for m in result.grouping.modes for e in m.members} <= newest
    window = "casewatch_failure_mode_window_turns"
    assert _value(metrics, window, assistant="canary", outcome="over_cap") == 30
    (run,) = latest_runs(store, "canary")
    assert run["over_cap"] == 30
