"""The failure-modes job: each assistant's failed turns of the window grouped into recurring
causes, on the job lease.

Per assistant with failed turns (severe or moderate) in the window, it reads the newest
``max_turns`` of them with the judges' reasons (``storage/failure_modes.py``), groups them
(``stats/failure_modes.py``), recognising the modes earlier runs found, and saves the modes,
which turn is in which and a run row in one transaction, fenced on the lease. Then the gauges:
the largest modes by rank, the count of modes and of emerging ones (``CasewatchNewFailureMode``
pages on it), where the window's turns went (grouped, unsorted, over the cap). A window with
too few failed turns groups nothing and says so (run row, log line, counter).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import structlog

from monitor.config.failure_modes import FailureModesConfig
from monitor.jobs.recorders import FailureModeRecorder
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import Clock, SystemClock
from monitor.schema.turn import METRICS
from monitor.storage.failure_modes import (
    assistants_with_failures,
    assistants_with_modes,
    count_failed,
    failed_turns,
    forget_assistant,
    known_modes,
    save_run,
)
from monitor.storage.leases import Fence
from monitor.storage.store import Store

if TYPE_CHECKING:
    from monitor.stats.failure_modes import Grouping, GroupingParams

log = structlog.get_logger(__name__)


def grouping_params(cfg: FailureModesConfig) -> GroupingParams:
    # The grouping's libraries (scikit-learn, scipy.stats: about 80 MB resident) load with the
    # first grouping, not with the daemon: a deployment whose assistants fail nothing never
    # pays for them, and the ingest path's memory stays what it was.
    from monitor.stats.failure_features import FeatureWeights
    from monitor.stats.failure_modes import GroupingParams

    w = cfg.weights
    return GroupingParams(
        min_turns=cfg.min_turns,
        min_mode_size=cfg.min_mode_size,
        distance_threshold=cfg.distance_threshold,
        sample_size=cfg.sample_size,
        reason_chars=cfg.reason_chars,
        query_chars=cfg.query_chars,
        weights=FeatureWeights(reasons=w.reasons, query=w.query, metrics=w.metrics),
        match_threshold=cfg.match_threshold,
        growth_alpha=cfg.growth_alpha,
        min_growth=cfg.min_growth,
    )


@dataclass(frozen=True)
class AssistantModes:
    assistant: str
    grouping: Grouping
    over_cap: int


def group_assistant(
    store: Store, cfg: FailureModesConfig, assistant: str, now: datetime
) -> AssistantModes:
    """One assistant's grouping of the window ending ``now`` (nothing saved)."""
    start = now - timedelta(seconds=cfg.window_seconds)
    recent_start = now - timedelta(seconds=cfg.recent_seconds)
    turns = list(failed_turns(store, assistant, start, now, limit=cfg.max_turns))
    over_cap = 0
    if len(turns) >= cfg.max_turns:
        over_cap = max(0, count_failed(store, assistant, start, now) - len(turns))
    from monitor.stats.failure_modes import group_failures

    grouping = group_failures(
        turns,
        METRICS,
        known_modes(store, assistant),
        grouping_params(cfg),
        recent_start=recent_start,
    )
    return AssistantModes(assistant, grouping, over_cap)


class FailureModesJob:
    name = "failure_modes"

    def __init__(
        self,
        config: FailureModesConfig,
        store: Store,
        metrics: Metrics,
        *,
        clock: Clock | None = None,
        lease_owner: str | None = None,
        retention_days: float | None = None,
    ) -> None:
        self._cfg = config
        self._store = store
        self._recorder = FailureModeRecorder(metrics)
        self._clock = clock or SystemClock()
        self._lease_owner = lease_owner
        self._retention_days = retention_days
        self.interval_seconds = config.interval_seconds
        self._exported: set[str] = set()

    def close(self) -> None:
        pass  # holds nothing beyond the store, which the daemon closes

    def run(self) -> None:
        self.run_once()

    def run_once(self) -> list[AssistantModes]:
        now = datetime.fromtimestamp(self._clock.time(), tz=UTC)
        start = now - timedelta(seconds=self._cfg.window_seconds)
        names = assistants_with_failures(self._store, start, now)
        fence = None
        if self._lease_owner is not None:
            fence = Fence(self.name, self._lease_owner, now)
        prune = None
        if self._retention_days is not None:
            prune = now - timedelta(days=self._retention_days)
        out = []
        for name in names:
            result = group_assistant(self._store, self._cfg, name, now)
            save_run(
                self._store,
                name,
                result.grouping,
                now,
                over_cap=result.over_cap,
                fence=fence,
                prune_runs_before=prune,
            )
            self._export(result)
            out.append(result)
        for gone in sorted(set(assistants_with_modes(self._store)) - set(names)):
            forget_assistant(self._store, gone)
        for gone in self._exported - set(names):
            self._recorder.forget(gone)
        self._exported = set(names)
        return out

    def _export(self, result: AssistantModes) -> None:
        g = result.grouping
        emerging = [m for m in g.modes if m.emerging]
        self._recorder.record_run(
            result.assistant,
            outcome=g.status,
            sizes=[m.size for m in g.modes],
            emerging=len(emerging),
            grouped=g.grouped,
            unsorted=g.unsorted,
            over_cap=result.over_cap,
        )
        log.info(
            "failure modes",
            assistant=result.assistant,
            status=g.status,
            turns=g.turns,
            modes=len(g.modes),
            unsorted=g.unsorted,
            over_cap=result.over_cap,
            note=g.note,
        )
        for m in emerging:
            log.warning(
                "emerging failure mode",
                assistant=result.assistant,
                mode=m.mode_id,
                label=m.label,
                new=m.new,
                growing=m.growing,
                size=m.size,
                recent=m.recent,
            )
