"""The drift job: per assistant, the recent window against the reference window, from the store.

Reads the windows through ``monitor.storage.drift_queries`` (so it sees every replica's
verdicts), runs ``monitor.stats.drift.analyze`` (and, for an assistant with case verdicts in
either window, ``monitor.stats.case_drift.analyze_cases`` on them), stores one row per signal in
``drift_results`` and sets the ``casewatch_drift_*`` gauges. ``casewatch drift`` runs the same
``analyze_store`` once from the command line.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from monitor.config.drift import DriftConfig
from monitor.jobs.recorders import DriftRecorder
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import Clock, SystemClock
from monitor.stats.case_drift import analyze_cases
from monitor.stats.drift import SignalResult, WindowSamples, analyze
from monitor.storage.case_drift_queries import case_window
from monitor.storage.drift_queries import (
    assistants_between,
    save_results,
    window_samples,
)
from monitor.storage.store import Store

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Windows:
    recent_start: datetime
    recent_end: datetime
    reference_start: datetime
    reference_end: datetime


def windows(cfg: DriftConfig, now: datetime) -> Windows:
    """The recent window ends now; the reference one is pinned, or just before the recent one.

    A pinned period reaching into the recent window is cut at its start, so no turn is in both
    (a period entirely inside or after it leaves an empty reference: insufficient data).
    """
    recent_start = now - timedelta(seconds=cfg.recent_window_seconds)
    if cfg.reference_period is not None:
        start, end = cfg.reference_period.bounds()
        end = min(end, recent_start)
        start = min(start, end)
    else:
        start = recent_start - timedelta(seconds=cfg.reference_window_seconds)
        end = recent_start
    return Windows(recent_start, now, start, end)


@dataclass(frozen=True)
class AssistantDrift:
    assistant: str
    recent_turns: int
    reference_turns: int
    results: list[SignalResult]

    @property
    def detected(self) -> list[str]:
        return [r.signal for r in self.results if r.detected]


@dataclass(frozen=True)
class DriftRun:
    run_at: datetime
    windows: Windows
    assistants: list[AssistantDrift]

    def to_dict(self) -> dict[str, Any]:
        w = self.windows
        return {
            "run_at": self.run_at.isoformat(),
            "windows": {
                "recent": [w.recent_start.isoformat(), w.recent_end.isoformat()],
                "reference": [w.reference_start.isoformat(), w.reference_end.isoformat()],
            },
            "assistants": [
                {
                    "assistant": a.assistant,
                    "recent_turns": a.recent_turns,
                    "reference_turns": a.reference_turns,
                    "detected": a.detected,
                    "signals": [r.to_dict() for r in a.results],
                }
                for a in self.assistants
            ],
        }


def _window(
    store: Store, assistant: str, start: datetime, end: datetime, labels: Sequence[str]
) -> WindowSamples:
    samples = WindowSamples(labels=tuple(labels))
    if start < end:
        for row in window_samples(store, assistant, start, end, labels):
            samples.add(row)
    return samples


def analyze_store(
    store: Store, cfg: DriftConfig, now: datetime, *, assistant: str | None = None
) -> DriftRun:
    """One drift analysis of every assistant seen in either window (or of ``assistant``)."""
    w = windows(cfg, now)
    if assistant is not None:
        names = [assistant]
    else:
        seen = set(assistants_between(store, w.recent_start, w.recent_end))
        if w.reference_start < w.reference_end:
            seen.update(assistants_between(store, w.reference_start, w.reference_end))
        names = sorted(seen)
    out = []
    for name in names:
        recent = _window(store, name, w.recent_start, w.recent_end, cfg.labels)
        reference = _window(store, name, w.reference_start, w.reference_end, cfg.labels)
        results = analyze(recent, reference, cfg)
        case_recent = case_window(store, name, w.recent_start, w.recent_end)
        case_reference = case_window(store, name, w.reference_start, w.reference_end)
        if case_recent.cases or case_reference.cases:  # an assistant whose cases are judged
            results += analyze_cases(case_recent, case_reference, cfg)
        out.append(AssistantDrift(name, recent.turns, reference.turns, results))
    return DriftRun(now, w, out)


def result_rows(run: DriftRun) -> Iterator[dict[str, Any]]:
    """``drift_results`` rows of a run."""
    w = run.windows
    for a in run.assistants:
        for r in a.results:
            yield {
                "run_at": run.run_at,
                "assistant": a.assistant,
                "signal": r.signal,
                "kind": r.kind,
                "test": r.test,
                "status": r.status,
                "statistic": r.statistic,
                "p_value": r.p_value,
                "q_value": r.q_value,
                "effect": r.effect,
                "effect_name": r.effect_name,
                "min_effect": r.min_effect,
                "shift": r.shift,
                "detected": r.detected,
                "recent_n": r.recent_n,
                "reference_n": r.reference_n,
                "recent_start": w.recent_start,
                "recent_end": w.recent_end,
                "reference_start": w.reference_start,
                "reference_end": w.reference_end,
                "details": r.details,
                "note": r.note,
            }


class DriftJob:
    name = "drift"

    def __init__(
        self,
        config: DriftConfig,
        store: Store,
        metrics: Metrics,
        *,
        clock: Clock | None = None,
        retention_days: float | None = None,
    ) -> None:
        self._cfg = config
        self._store = store
        self._metrics = DriftRecorder(metrics)
        self._clock = clock or SystemClock()
        self._retention_days = retention_days
        self.interval_seconds = config.interval_seconds
        self._exported: set[str] = set()
        self.last_run: DriftRun | None = None

    def close(self) -> None:
        pass  # holds nothing beyond the store, which the daemon closes

    def run(self) -> None:
        self.run_once()

    def run_once(self) -> DriftRun:
        now = datetime.fromtimestamp(self._clock.time(), tz=UTC)
        run = analyze_store(self._store, self._cfg, now)
        prune = None
        if self._retention_days is not None:
            prune = now - timedelta(days=self._retention_days)
        save_results(self._store, result_rows(run), prune_before=prune)
        self._export(run)
        self.last_run = run
        for a in run.assistants:
            log.info(
                "drift run",
                assistant=a.assistant,
                recent_turns=a.recent_turns,
                reference_turns=a.reference_turns,
                detected=a.detected,
            )
        return run

    def _export(self, run: DriftRun) -> None:
        m = self._metrics
        current = {a.assistant for a in run.assistants}
        for gone in self._exported - current:
            m.forget_drift(gone)
        for a in run.assistants:
            m.record_drift_windows(a.assistant, recent=a.recent_turns, reference=a.reference_turns)
            for r in a.results:
                m.record_drift_signal(
                    a.assistant, r.signal, q_value=r.q_value, effect=r.effect, detected=r.detected
                )
        m.record_drift_run(run.run_at.timestamp())
        self._exported = current
