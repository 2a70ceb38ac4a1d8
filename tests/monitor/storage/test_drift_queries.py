"""Drift's SQL on SQLite and PostgreSQL: window samples from the stored event, results rows."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, select

from monitor.storage.drift_queries import (
    assistants_between,
    latest_results,
    save_results,
    window_samples,
)
from monitor.storage.store import Store
from monitor.storage.tables import drift_results
from tests.fixtures.databases import make_turn, make_verdict
from tests.fixtures.drift import NOW, verdict_for


def test_window_samples_read_inputs_from_the_stored_event(store: Store) -> None:
    rich = make_turn(
        "rich",
        timestamp=(NOW - timedelta(minutes=10)).isoformat(),
        case={"subject": "s", "description": "d", "product": "VPN", "environment": "prod"},
        labels={"channel": "chat", "region.code": "eu-1"},
        contexts=[
            {"id": "a", "text": "x" * 5000, "score": 0.25},
            {"id": "b", "text": "y", "score": 0.75},
            {"id": "c", "text": "z"},
        ],
        answer="Réinstallez le pilote",  # 21 characters, 22 bytes in UTF-8
    )
    bare = make_turn(
        "bare", timestamp=(NOW - timedelta(minutes=20)).isoformat(), contexts=[], labels={}
    )
    store.save(rich, verdict_for(rich, 0.1))
    store.save(bare, make_verdict(bare, failed=True))

    rows = list(
        window_samples(
            store,
            "helpdesk",
            NOW - timedelta(hours=1),
            NOW,
            labels=["channel", "region.code", "absent"],
        )
    )
    by_status = {r.status: r for r in rows}
    ok = by_status["ok"]
    assert (ok.product, ok.environment) == ("VPN", "prod")
    assert ok.labels == {"channel": "chat", "region.code": "eu-1", "absent": None}
    assert (ok.contexts_count, ok.retrieval_score, ok.answer_length) == (3, 0.75, 21)
    assert ok.s_final is not None and abs(ok.s_final - 0.1) < 1e-9
    assert ok.turn_band == "severe"
    assert ok.metric_bands == {m: "severe" for m in ok.metric_bands} and len(ok.metric_bands) == 8

    failed = by_status["judge_failed"]
    assert (failed.s_final, failed.turn_band, failed.metric_bands) == (None, None, {})
    assert (failed.product, failed.contexts_count, failed.retrieval_score) == (None, 0, None)
    assert failed.labels == {"channel": None, "region.code": None, "absent": None}


def test_a_window_is_half_open_per_assistant_and_uses_the_newest_verdict(store: Store) -> None:
    start, end = NOW - timedelta(hours=1), NOW
    inside = make_turn("inside", timestamp=start.isoformat())
    at_end = make_turn("at-end", timestamp=end.isoformat())
    before = make_turn("before", timestamp=(start - timedelta(seconds=1)).isoformat())
    other = make_turn(
        "other", assistant="billing", timestamp=(end - timedelta(minutes=1)).isoformat()
    )
    for t in (inside, at_end, before, other):
        store.save(t, verdict_for(t, 0.9))
    # A changed judge configuration judged "inside" again, worse: that verdict is the one read.
    store.save(inside, verdict_for(inside, 0.2, config_hash="cfg-b"))

    rows = list(window_samples(store, "helpdesk", start, end))
    assert len(rows) == 1
    assert rows[0].s_final is not None and abs(rows[0].s_final - 0.2) < 1e-9
    assert assistants_between(store, start, end) == ["billing", "helpdesk"]
    assert assistants_between(store, end, end + timedelta(hours=1)) == ["helpdesk"]


def _row(run_minutes_ago: float, signal: str, assistant: str = "helpdesk") -> dict[str, object]:
    run_at = NOW - timedelta(minutes=run_minutes_ago)
    return {
        "run_at": run_at,
        "assistant": assistant,
        "signal": signal,
        "kind": "outcome",
        "test": "ks_2samp",
        "status": "ok",
        "statistic": 0.4,
        "p_value": 0.001,
        "q_value": 0.002,
        "effect": 0.4,
        "effect_name": "ks_d",
        "min_effect": 0.1,
        "shift": -0.3,
        "detected": True,
        "recent_n": 80,
        "reference_n": 300,
        "recent_start": run_at - timedelta(hours=1),
        "recent_end": run_at,
        "reference_start": run_at - timedelta(days=7, hours=1),
        "reference_end": run_at - timedelta(hours=1),
        "details": {"cliffs_delta": -0.5},
        "note": "",
    }


def test_results_are_stored_read_back_and_pruned(store: Store) -> None:
    assert latest_results(store) == []
    save_results(store, [_row(60, "score_final"), _row(60, "band_shares")])
    save_results(store, [_row(5, "score_final"), _row(5, "score_final", assistant="billing")])
    latest = latest_results(store)
    assert [(r["assistant"], r["signal"]) for r in latest] == [
        ("helpdesk", "score_final"),
        ("billing", "score_final"),
    ]
    assert latest[0]["details"] == {"cliffs_delta": -0.5}
    assert latest[0]["run_at"] == NOW - timedelta(minutes=5)
    assert latest[0]["detected"] is True

    save_results(store, [], prune_before=NOW - timedelta(minutes=30))
    assert len(latest_results(store, "helpdesk")) == 1
    assert latest_results(store, "nobody") == []
    with store.transaction(write=False) as conn:
        assert conn.scalar(select(func.count()).select_from(drift_results)) == 2
