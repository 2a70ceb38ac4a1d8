"""The failure-modes job on failed cases (SQLite and PostgreSQL): planted case modes found
apart from the turns' modes, listed by ``inspect failures --cases`` and shown case by case by
``inspect failure ID``; and the embeddings path through the real openai client against a fake
HTTP embeddings server, with the fallback to TF-IDF when the server is down, counted."""

from __future__ import annotations

import json
import random
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from monitor.cli import main
from monitor.config.failure_modes import EmbeddingsConfig, FailureModesConfig
from monitor.errors import EmbeddingUnavailable
from monitor.jobs.failure_modes import FailureModesJob
from monitor.judging.embeddings import EmbeddingsClient
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.storage.failure_modes import latest_runs, list_modes, mode_cases
from monitor.storage.store import Store
from tests.support.fake_embeddings_server import FakeEmbeddingsServer
from tests.support.planted_cases import CASE_MODES, store_fine_case, store_planted_case
from tests.support.planted_failures import planted_turns
from tests.support.stored_failures import store_failed

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
WEEK_AGO = NOW - timedelta(days=7)
PER_MODE = 14


def _value(m: Metrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def _plant_cases(store: Store, assistant: str = "canary", seed: int = 31) -> dict[str, str]:
    """PER_MODE failed cases of each planted mode over the week, and a few fine ones; the
    planted mode of each conversation id."""
    rng = random.Random(seed)
    truth: dict[str, str] = {}
    n = 0
    for mode in CASE_MODES:
        for _ in range(PER_MODE):
            n += 1
            conv = f"case-{n}"
            at = WEEK_AGO + timedelta(hours=2 + rng.uniform(0, 160))
            store_planted_case(store, assistant, conv, mode, rng, at)
            truth[conv] = mode
    for i in range(5):
        store_fine_case(store, assistant, f"fine-{i}", WEEK_AGO + timedelta(days=1, hours=i))
    return truth


def _job(store: Store, cfg: FailureModesConfig | None = None) -> tuple[FailureModesJob, Metrics]:
    metrics = Metrics(CollectorRegistry())
    clock = ManualClock(start=NOW.timestamp())
    return FailureModesJob(cfg or FailureModesConfig(), store, metrics, clock=clock), metrics


def _recovered(modes: list[tuple[str, ...]], truth: dict[str, str]) -> bool:
    """Each found mode holds one planted mode only, and each planted mode is one found mode."""
    found = [Counter(truth[c] for c in members) for members in modes]
    return len(found) == len(CASE_MODES) and all(len(c) == 1 for c in found)


def _pure(modes: list[tuple[str, ...]], truth: dict[str, str]) -> bool:
    """Each found mode holds one planted mode only, and every planted mode is found (one may
    be split in two)."""
    found = [Counter(truth[c] for c in members) for members in modes]
    covered = {mode for c in found for mode in c}
    return all(len(c) == 1 for c in found) and covered == set(CASE_MODES)


def test_failed_cases_group_into_their_planted_modes_apart_from_turns(store: Store) -> None:
    truth = _plant_cases(store)
    turns, _ = planted_turns(
        60, 2, noise=0.0, seed=32, start=WEEK_AGO + timedelta(hours=2), span=timedelta(days=6)
    )
    store_failed(store, turns, "canary")
    job, metrics = _job(store)

    results = job.run_once()

    by_unit = {r.unit: r for r in results}
    assert set(by_unit) == {"turn", "case"}
    cases = by_unit["case"].grouping
    assert cases.status == "grouped" and cases.turns == 3 * PER_MODE  # the fine ones left out
    assert _recovered([m.members for m in cases.modes], truth)
    assert all(m.mode_id.startswith("fc-") for m in cases.modes)
    assert all(m.mode_id.startswith("fm-") for m in by_unit["turn"].grouping.modes)
    escalation = next(m for m in cases.modes if truth[m.members[0]] == "never escalated")
    assert escalation.metrics == ("resolution", "workflow_alignment")
    assert "escalat" in escalation.label

    # Stored apart: the turns' listing never shows a case mode, nor the cases' a turn mode.
    case_rows = list_modes(store, "canary", unit="case")
    turn_rows = list_modes(store, "canary")
    assert {m.mode_id for m in case_rows} == {m.mode_id for m in cases.modes}
    assert {m.unit for m in case_rows} == {"case"} and {m.unit for m in turn_rows} == {"turn"}
    (run,) = latest_runs(store, "canary", "case")
    assert run["unit"] == "case" and run["turns"] == 3 * PER_MODE
    assert _value(metrics, "casewatch_failure_modes", assistant="canary", unit="case") == 3
    assert _value(metrics, "casewatch_failure_modes", assistant="canary", unit="turn") == 2
    assert _value(metrics, "casewatch_failure_mode_runs_total", assistant="canary",
                  unit="case", outcome="grouped") == 1  # fmt: skip

    # A mode's cases: conversation ids, newest first, with the case judge's reasons.
    shown = mode_cases(store, "canary", escalation.mode_id, limit=50)
    assert [c.event_id for c in shown] == list(escalation.examples[:1]) + [
        c.event_id for c in shown[1:]
    ]
    assert [c.at for c in shown] == sorted((c.at for c in shown), reverse=True)
    assert {c.event_id for c in shown} == set(escalation.members)
    assert all("escalat" in c.reasons["workflow_alignment"] for c in shown)
    assert all(c.query and c.query != "Still broken." for c in shown)  # the first query

    # A second run keeps the case modes' ids.
    (_, again) = job.run_once()
    assert {m.mode_id for m in again.grouping.modes} == {m.mode_id for m in cases.modes}


def test_inspect_failures_lists_case_modes_and_one_case_mode_lists_its_cases(
    store: Store, db_url: str
) -> None:
    truth = _plant_cases(store)
    job, _ = _job(store)
    (result,) = job.run_once()
    assert result.unit == "case"
    runner = CliRunner()

    listed = runner.invoke(main, ["inspect", "failures", "--cases", "--db", db_url])
    assert listed.exit_code == 0, listed.output
    assert "canary: grouped" in listed.output and "cases" in listed.output
    for m in result.grouping.modes:
        assert m.mode_id in listed.output
    turns_only = runner.invoke(main, ["inspect", "failures", "--db", db_url])
    assert not any(m.mode_id in turns_only.output for m in result.grouping.modes)

    mode = result.grouping.modes[0]
    shown = runner.invoke(main, ["inspect", "failure", mode.mode_id, "--db", db_url, "--json"])
    assert shown.exit_code == 0, shown.output
    doc = json.loads(shown.output)
    assert doc["unit"] == "case" and len(doc["cases"]) == mode.size
    ids = [c["conversation_id"] for c in doc["cases"]]
    assert set(ids) == set(mode.members) and {truth[i] for i in ids} == {truth[ids[0]]}
    times = [c["judged_at"] for c in doc["cases"]]
    assert times == sorted(times, reverse=True)
    assert all(c["reasons"] and c["first_query"] for c in doc["cases"])
    text = runner.invoke(main, ["inspect", "failure", mode.mode_id, "--db", db_url])
    assert text.exit_code == 0 and ids[0] in text.output and "first query:" in text.output


def test_embeddings_from_an_openai_compatible_endpoint_group_the_cases(store: Store) -> None:
    truth = _plant_cases(store)
    with FakeEmbeddingsServer(dim=256) as server:
        cfg = FailureModesConfig(
            embeddings=EmbeddingsConfig(
                base_url=server.base_url, model="fake-embed", batch_size=16, max_retries=0
            )
        )
        job, metrics = _job(store, cfg)
        try:
            (result,) = job.run_once()
        finally:
            job.close()
        requests = list(server.requests)
    assert result.fallback is None
    assert _pure([m.members for m in result.grouping.modes], truth)
    assert result.grouping.grouped >= 0.9 * 3 * PER_MODE
    assert requests and all(r["model"] == "fake-embed" for r in requests)
    assert max(len(r["input"]) for r in requests) <= 16  # batched
    assert sum(len(r["input"]) for r in requests) <= 3 * PER_MODE  # each distinct text once
    assert _value(metrics, "casewatch_failure_mode_embedding_fallback_total",
                  reason="down") == 0  # fmt: skip


def test_the_endpoint_down_falls_back_to_text_features_counted(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    truth = _plant_cases(store)
    server = FakeEmbeddingsServer()
    url = server.base_url
    server.close()  # nothing listens on its port any more
    cfg = FailureModesConfig(
        embeddings=EmbeddingsConfig(
            base_url=url, model="fake-embed", max_retries=0, timeout_seconds=5
        )
    )
    job, metrics = _job(store, cfg)
    try:
        (result,) = job.run_once()
    finally:
        job.close()
    assert result.fallback == "down"
    assert _recovered([m.members for m in result.grouping.modes], truth)  # TF-IDF did it
    assert _value(metrics, "casewatch_failure_mode_embedding_fallback_total",
                  reason="down") == 1  # fmt: skip
    assert _value(metrics, "casewatch_failure_mode_embedding_fallback_total",
                  reason="error") == 0  # fmt: skip


def test_an_endpoint_error_and_the_cap_raise_a_bounded_reason() -> None:
    with FakeEmbeddingsServer() as server:
        server.status = 503
        waits: list[float] = []
        client = EmbeddingsClient(
            EmbeddingsConfig(base_url=server.base_url, model="m", max_retries=1, max_texts=3),
            sleep=waits.append,
        )
        with pytest.raises(EmbeddingUnavailable) as failed:
            client.embed(["a text"])
        assert failed.value.reason == "error" and len(server.requests) == 2  # one retry
        assert len(waits) == 1 and client.requests == 2
        server.status = 200
        client.begin_run()
        assert client.embed(["one", "two"]).shape == (2, 256)
        with pytest.raises(EmbeddingUnavailable) as capped:
            client.embed(["three", "four"])
        assert capped.value.reason == "over_cap"
        client.close()
