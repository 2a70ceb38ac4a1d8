"""The regression page's failure modes, on SQLite and PostgreSQL: while a detector holds an
alarm, the detection job exports the largest modes among the failed turns since its change
point (each mode's number as the value, never a label), as the failure-modes job's newest
grouping put them; it reads them again only when that grouping or the point moves, and removes
them when the alarm clears. ``casewatch inspect failures --since-change`` prints the same
ranking from the store, and ``inspect failure`` takes the number the page prints."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
import structlog
from click.testing import CliRunner
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from monitor.cli import main
from monitor.config.failure_modes import FailureModesConfig
from monitor.jobs.detection import DetectionJob
from monitor.jobs.failure_modes import FailureModesJob
from monitor.jobs.recorders import DetectionRecorder
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.scoring.turn import DEFAULT_CRITICAL_METRICS
from monitor.stats.cusum_calibration import Calibration
from monitor.stats.detection import Alarm
from monitor.stats.detection_signals import Signal
from monitor.stats.detector_state import DetectorState
from monitor.stats.failure_modes import Mode
from monitor.storage.detection_queries import read_states
from monitor.storage.failure_modes import mode_id_of, mode_number, modes_since
from monitor.storage.store import Store
from monitor.storage.tables import detector_states
from tests.fixtures.detection import config
from tests.support.planted_failures import planted_turn, planted_turns
from tests.support.stored_failures import store_failed

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
GROUPED_AT = NOW + timedelta(hours=1)
CHANGE_POINT = NOW - timedelta(days=1)
POLICY = 6  # "policy fabricated": the canary's new cause after the change point
SIGNAL = "turn_severe"
ID = "casewatch_failure_mode_since_change_id"
SHARE = "casewatch_failure_mode_since_change_share"


@pytest.fixture(autouse=True)
def _every_level_captured() -> Iterator[None]:
    """``capture_logs`` sees only what the configured level lets through, and a ``casewatch``
    command run in process earlier (``broker`` sets warning) leaves its level behind."""
    saved = structlog.get_config()
    structlog.reset_defaults()
    yield
    structlog.configure(**saved)


def _grouped(store: Store) -> tuple[list[Mode], int]:
    """Three steady causes over the week, then 30 turns of a new one after NOW, grouped at
    GROUPED_AT: the modes of that run and the failed turns since the change point."""
    turns, _ = planted_turns(240, 3, noise=0.0, seed=21, start=NOW - timedelta(days=7, hours=-2),
                             span=timedelta(days=6.8))  # fmt: skip
    rng = random.Random(22)
    late = [planted_turn(POLICY, rng, NOW + timedelta(minutes=10 + i), f"late-{i}")
            for i in range(30)]  # fmt: skip
    store_failed(store, [*turns, *late], "canary")
    clock = ManualClock(start=GROUPED_AT.timestamp())
    job = FailureModesJob(FailureModesConfig(), store, Metrics(CollectorRegistry()), clock=clock)
    (result,) = job.run_once()
    since = sum(1 for t in [*turns, *late] if t.at >= CHANGE_POINT)
    return list(result.grouping.modes), since


def _expected(modes: list[Mode]) -> list[tuple[Mode, int]]:
    counts = Counter(
        {m.mode_id: sum(1 for t in m.member_times if t >= CHANGE_POINT) for m in modes}
    )
    by_id = {m.mode_id: m for m in modes}
    ranked = sorted(((i, n) for i, n in counts.items() if n), key=lambda kv: (-kv[1], kv[0]))
    return [(by_id[i], n) for i, n in ranked]


def _alarm(store: Store, shifts: tuple[float, ...], *, change_point: datetime | None) -> None:
    """The canary's turn_severe detector, holding an alarm raised at GROUPED_AT."""
    state = DetectorState.new("canary", Signal.from_name(SIGNAL), shifts)
    state.armed, state.baseline_rate, state.baseline_source = True, 0.05, "pinned"
    state.calibration = Calibration(0.05, tuple(0.05 * c for c in shifts), (6.0,) * len(shifts))
    state.detector.latched = Alarm(
        2.0, None if change_point is None else change_point.timestamp(), 100, 30
    )
    state.alarm_at = GROUPED_AT
    with store.transaction(write=True) as conn:
        conn.execute(sa.delete(detector_states))
        conn.execute(sa.insert(detector_states).values(**state.to_row(GROUPED_AT)))


def _clear_alarm(store: Store, shifts: tuple[float, ...]) -> None:
    (raw,) = [r for r in read_states(store) if r["signal"] == SIGNAL]
    state = DetectorState.from_row(raw, shifts)
    state.detector.latched, state.alarm_at = None, None
    mine = detector_states.c.signal == SIGNAL
    with store.transaction(write=True) as conn:
        conn.execute(sa.update(detector_states).where(mine).values(**state.to_row(GROUPED_AT)))


def _job(store: Store, **kw: object) -> tuple[DetectionJob, Metrics]:
    metrics = Metrics(CollectorRegistry())
    clock = ManualClock(start=(GROUPED_AT + timedelta(minutes=1)).timestamp())
    job = DetectionJob(config(), list(DEFAULT_CRITICAL_METRICS), store,
                       DetectionRecorder(metrics), clock=clock, **kw)  # type: ignore[arg-type]  # fmt: skip
    return job, metrics


def _gauge(metrics: Metrics, name: str, rank: int) -> float | None:
    labels = {"assistant": "canary", "signal": SIGNAL, "rank": str(rank)}
    return metrics.registry.get_sample_value(name, labels)


def test_an_alarm_names_the_largest_modes_since_its_change_point(store: Store) -> None:
    modes, failed_since = _grouped(store)
    expected = _expected(modes)
    assert len(expected) >= 3
    new = next(m for m in modes if m.new)
    assert expected[0] == (new, 30)  # the new cause leads since the change point
    shifts = tuple(config().shifts)
    _alarm(store, shifts, change_point=CHANGE_POINT)
    job, metrics = _job(store, failure_modes=True)

    with capture_logs() as logs:
        job.run_once()
        job.run_once()  # nothing moved: not read again

    for rank, (mode, n) in enumerate(expected[:3], start=1):
        number = _gauge(metrics, ID, rank)
        assert number == mode_number(mode.mode_id)
        assert mode_id_of(f"{number:.0f}") == mode.mode_id  # what `inspect failure` is given
        assert _gauge(metrics, SHARE, rank) == n / failed_since
    assert _gauge(metrics, ID, 4) is None
    reads = [e for e in logs if e["event"] == "failure modes since the change point"]
    assert len(reads) == 1 and reads[0]["failed"] == failed_since

    # The store's ranking is the page's, whichever backend.
    ranked = modes_since(store, "canary", CHANGE_POINT, limit=10)
    assert [(m.mode_id, n) for m, n in ranked.modes] == [(m.mode_id, n) for m, n in expected]
    assert ranked.grouped_at == GROUPED_AT and ranked.failed == failed_since

    _clear_alarm(store, shifts)
    job.run_once()
    assert all(_gauge(metrics, name, r) is None for name in (ID, SHARE) for r in (1, 2, 3))


def test_without_a_change_point_the_modes_since_the_alarm_are_named(store: Store) -> None:
    modes, _ = _grouped(store)
    _alarm(store, tuple(config().shifts), change_point=None)  # alarm at GROUPED_AT: none since
    job, metrics = _job(store, failure_modes=True)
    job.run_once()
    assert _gauge(metrics, ID, 1) is None
    assert modes_since(store, "canary", GROUPED_AT, limit=3).modes == ()
    assert modes  # there are modes, just none since the alarm


def test_nothing_is_named_when_the_failure_modes_job_is_off(store: Store) -> None:
    _grouped(store)
    _alarm(store, tuple(config().shifts), change_point=CHANGE_POINT)
    job, metrics = _job(store)
    job.run_once()
    assert _gauge(metrics, ID, 1) is None and _gauge(metrics, SHARE, 1) is None


def test_inspect_prints_the_same_ranking_and_takes_the_number(store: Store) -> None:
    modes, failed_since = _grouped(store)
    expected = _expected(modes)
    runner = CliRunner()
    quiet = runner.invoke(main, ["inspect", "failures", "--since-change", "--db", store.url])
    assert quiet.exit_code == 0, quiet.output
    assert "no detector is in alarm" in quiet.output
    _alarm(store, tuple(config().shifts), change_point=CHANGE_POINT)

    result = runner.invoke(
        main, ["inspect", "failures", "--since-change", "--db", store.url, "--json"]
    )
    assert result.exit_code == 0, result.output
    (regression,) = json.loads(result.output)["regressions"]
    assert regression["assistant"] == "canary" and regression["signal"] == SIGNAL
    assert regression["since_kind"] == "change_point" and regression["failed"] == failed_since
    assert [(m["mode_id"], m["turns"]) for m in regression["modes"]] == [
        (m.mode_id, n) for m, n in expected
    ]
    top = regression["modes"][0]
    assert top["number"] == mode_number(top["mode_id"])

    text = runner.invoke(main, ["inspect", "failures", "--since-change", "--db", store.url])
    assert text.exit_code == 0, text.output
    assert "canary turn_severe: in alarm, change point 2026-12-05 12:00 UTC" in text.output
    assert f"{failed_since} failed turns since then" in text.output
    assert re.search(rf"\b{top['mode_id']}\s+{top['number']}\s+{top['turns']}\s", text.output)

    shown = runner.invoke(main, ["inspect", "failure", str(top["number"]), "--db", store.url])
    assert shown.exit_code == 0, shown.output
    assert shown.output.startswith(f"{top['mode_id']} (canary)")
