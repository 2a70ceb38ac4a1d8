"""The failure-modes job: each assistant's failed turns of the window grouped into recurring
causes, on the job lease.

Per assistant with failed turns (severe or moderate) in the window, it reads the newest
``max_turns`` of them with the judges' reasons (``storage/failure_modes.py``), groups them
(``stats/failure_modes.py``), recognising the modes earlier runs found, and saves the modes,
which turn is in which and a run row in one transaction, fenced on the lease. Then the gauges:
the largest modes by rank, the count of modes and of emerging ones (``CasewatchNewFailureMode``
pages on it), where the window's turns went (grouped, unsorted, over the cap). A window with
too few failed turns groups nothing and says so (run row, log line, counter).

Failed cases (a severe or moderate case band; ``failure_modes.cases``) are grouped the same way
per assistant, on their own: unit ``case`` on the stored modes, members and runs and on the
gauges, ids ``fc-…``. With ``failure_modes.embeddings`` configured, the text features are the
endpoint's embeddings (``judging/embeddings.py``); when it is down, errors, times out or the run
would embed more than its cap, that grouping is done again on the TF-IDF features, counted in
``casewatch_failure_mode_embedding_fallback_total{reason}`` and logged once per run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import structlog

from monitor.config.failure_modes import FailureModesConfig
from monitor.errors import EmbeddingUnavailable
from monitor.jobs.recorders import FailureModeRecorder
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import Clock, SystemClock
from monitor.schema.case import CASE_METRICS
from monitor.schema.turn import METRICS
from monitor.storage.failure_modes import (
    CASE,
    TURN,
    assistants_with_failed_cases,
    assistants_with_failures,
    assistants_with_modes,
    count_failed,
    count_failed_cases,
    failed_cases,
    failed_turns,
    forget_assistant,
    known_modes,
    save_run,
)
from monitor.storage.leases import Fence
from monitor.storage.store import Store

if TYPE_CHECKING:
    from monitor.judging.embeddings import EmbeddingsClient
    from monitor.stats.failure_features import FailedTurn
    from monitor.stats.failure_modes import Grouping, GroupingParams

log = structlog.get_logger(__name__)


def grouping_params(cfg: FailureModesConfig, unit: str = TURN) -> GroupingParams:
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
        unit=unit,
        id_prefix="fc-" if unit == CASE else "fm-",
    )


@dataclass(frozen=True)
class AssistantModes:
    assistant: str
    grouping: Grouping
    over_cap: int
    unit: str = TURN
    fallback: str | None = None  # why the embeddings were not used (None: used, or none set)
    fallback_detail: str = ""


Reader = Callable[..., Iterator["FailedTurn"]]
_UNITS: dict[str, tuple[Reader, Callable[..., int], tuple[str, ...]]] = {
    TURN: (failed_turns, count_failed, METRICS),
    CASE: (failed_cases, count_failed_cases, CASE_METRICS),
}


def group_assistant(
    store: Store,
    cfg: FailureModesConfig,
    assistant: str,
    now: datetime,
    *,
    unit: str = TURN,
    embedder: EmbeddingsClient | None = None,
) -> AssistantModes:
    """One assistant's grouping of the failed turns (or cases) of the window ending ``now``
    (nothing saved). With ``embedder``, on its embeddings; on the TF-IDF features when it
    fails (``fallback`` says why)."""
    read, count, metrics = _UNITS[unit]
    start = now - timedelta(seconds=cfg.window_seconds)
    recent_start = now - timedelta(seconds=cfg.recent_seconds)
    items = list(read(store, assistant, start, now, limit=cfg.max_turns))
    over_cap = 0
    if len(items) >= cfg.max_turns:
        over_cap = max(0, count(store, assistant, start, now) - len(items))
    from monitor.stats.failure_modes import group_failures

    known = known_modes(store, assistant, unit)
    params = grouping_params(cfg, unit)
    if embedder is not None:
        embedder.begin_run()
        try:
            grouping = group_failures(
                items, metrics, known, params, recent_start=recent_start, embed=embedder.embed
            )
        except EmbeddingUnavailable as exc:
            grouping = group_failures(items, metrics, known, params, recent_start=recent_start)
            return AssistantModes(assistant, grouping, over_cap, unit, exc.reason, exc.detail)
        return AssistantModes(assistant, grouping, over_cap, unit)
    grouping = group_failures(items, metrics, known, params, recent_start=recent_start)
    return AssistantModes(assistant, grouping, over_cap, unit)


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
        self._exported: dict[str, set[str]] = {TURN: set(), CASE: set()}
        self._embedder: EmbeddingsClient | None = None
        if config.embeddings is not None:
            from monitor.judging.embeddings import EmbeddingsClient

            self._embedder = EmbeddingsClient(config.embeddings)
            self._recorder.embeddings_configured()

    def close(self) -> None:
        if self._embedder is not None:
            self._embedder.close()

    def run(self) -> None:
        self.run_once()

    def run_once(self) -> list[AssistantModes]:
        """Turns first, then cases (when ``failure_modes.cases``); one result per assistant
        and unit grouped."""
        now = datetime.fromtimestamp(self._clock.time(), tz=UTC)
        start = now - timedelta(seconds=self._cfg.window_seconds)
        fence = None
        if self._lease_owner is not None:
            fence = Fence(self.name, self._lease_owner, now)
        prune = None
        if self._retention_days is not None:
            prune = now - timedelta(days=self._retention_days)
        out: list[AssistantModes] = []
        fallbacks: list[AssistantModes] = []
        for unit in (TURN, CASE):
            names: list[str] = []
            if unit == TURN:
                names = assistants_with_failures(self._store, start, now)
            elif self._cfg.cases:
                names = assistants_with_failed_cases(self._store, start, now)
            for name in names:
                result = group_assistant(
                    self._store, self._cfg, name, now, unit=unit, embedder=self._embedder
                )
                save_run(
                    self._store,
                    name,
                    result.grouping,
                    now,
                    over_cap=result.over_cap,
                    fence=fence,
                    prune_runs_before=prune,
                    unit=unit,
                )
                if result.fallback is not None:
                    self._recorder.record_fallback(result.fallback)
                    fallbacks.append(result)
                self._export(result)
                out.append(result)
            for gone in sorted(set(assistants_with_modes(self._store, unit)) - set(names)):
                forget_assistant(self._store, gone, unit)
            for gone in self._exported[unit] - set(names):
                self._recorder.forget(gone, unit)
            self._exported[unit] = set(names)
        if fallbacks:  # once per run, however many groupings fell back
            first = fallbacks[0]
            log.warning(
                "failure modes grouped on TF-IDF text features: the embeddings endpoint failed",
                reason=first.fallback,
                detail=first.fallback_detail,
                groupings=len(fallbacks),
                reasons=sorted({str(r.fallback) for r in fallbacks}),
            )
        return out

    def _export(self, result: AssistantModes) -> None:
        g = result.grouping
        emerging = [m for m in g.modes if m.emerging]
        self._recorder.record_run(
            result.assistant,
            unit=result.unit,
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
            unit=result.unit,
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
                unit=result.unit,
                mode=m.mode_id,
                label=m.label,
                new=m.new,
                growing=m.growing,
                size=m.size,
                recent=m.recent,
            )
