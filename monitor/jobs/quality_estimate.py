"""The severe rate corrected by human labels, per assistant and signal, from the store.

A signal is a metric (its band) or ``turn_band``; "severe" is the outcome. The labelled set is
a labelling batch (``casewatch labels export``: a uniform random sample of the assistant's
scored turns in a frame), its human bands against the judge's bands recorded when drawn; the
unlabelled set is the rest of that frame as the judge scored it. ``monitor.reporting.ppi``
turns them into the corrected rate, the judge-only and the labels-only rates. The job exports
the newest labelled batch's estimates as ``casewatch_quality_estimate``; ``casewatch estimate``
prints the same thing once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from monitor.clock import Clock, SystemClock
from monitor.exporter import Metrics
from monitor.jobs.recorders import QualityEstimateRecorder
from monitor.models import Band
from monitor.reporting.label_files import LABEL_KEYS, consensus
from monitor.reporting.ppi import RateEstimates, rate_estimates
from monitor.settings import QualityEstimateConfig
from monitor.storage import labels as label_sql
from monitor.storage.store import Store

log = structlog.get_logger(__name__)
SEVERE = Band.SEVERE.value


@dataclass(frozen=True)
class QualityEstimate:
    assistant: str
    signal: str  # a metric or turn_band
    batch_id: str
    population: int  # scored turns in the batch's frame now
    labelled: int
    estimates: RateEstimates

    def to_dict(self) -> dict[str, Any]:
        return {
            "assistant": self.assistant,
            "signal": self.signal,
            "outcome": SEVERE,
            "batch": self.batch_id,
            "population": self.population,
            "labelled": self.labelled,
            **self.estimates.to_dict(),
        }


def labelled_batch(store: Store, assistant: str, batch_id: str | None = None) -> str | None:
    """``batch_id`` if given, else the assistant's newest batch holding labels."""
    if batch_id is not None:
        return batch_id
    for batch in reversed(label_sql.batches(store, assistant)):
        if label_sql.stored_labels(store, [batch["id"]]):
            return str(batch["id"])
    return None


def estimate_batch(
    store: Store, batch_id: str, signals: Sequence[str] = LABEL_KEYS, confidence: float = 0.95
) -> list[QualityEstimate]:
    """One estimate per signal people labelled in the batch."""
    batch = label_sql.batch(store, batch_id)
    if batch is None:
        raise KeyError(batch_id)
    human = consensus(label_sql.stored_labels(store, [batch_id]))
    drawn = {e: bands for (_b, e), bands in label_sql.batch_items(store, [batch_id]).items()}
    end = batch["frame_end"] or batch["created_at"]
    frame = list(label_sql.judged_frame(store, batch["assistant"], batch["frame_start"], end))
    out = []
    for signal in signals:
        pairs = [
            (labels[signal].value == SEVERE, drawn[e].get(signal) == SEVERE)
            for e, labels in human.items()
            if signal in labels and e in drawn
        ]
        if not pairs:
            continue
        unlabelled = [r.bands.get(signal) == SEVERE for r in frame if r.event_id not in human]
        est = rate_estimates(
            [float(y) for y, _ in pairs],
            [float(f) for _, f in pairs],
            [float(g) for g in unlabelled],
            confidence=confidence,
        )
        out.append(
            QualityEstimate(str(batch["assistant"]), signal, batch_id, len(frame), len(pairs), est)
        )
    return out


class QualityEstimateJob:
    name = "quality_estimate"

    def __init__(
        self,
        config: QualityEstimateConfig,
        store: Store,
        metrics: Metrics,
        *,
        clock: Clock | None = None,
    ) -> None:
        self._cfg = config
        self._store = store
        self._metrics = QualityEstimateRecorder(metrics)
        self._clock = clock or SystemClock()
        self.interval_seconds = config.interval_seconds
        self.last_run: list[QualityEstimate] = []

    def close(self) -> None:
        pass  # holds nothing beyond the store, which the daemon closes

    def run(self) -> None:
        self.run_once()

    def run_once(self) -> list[QualityEstimate]:
        started = datetime.fromtimestamp(self._clock.time(), tz=UTC)
        done: list[QualityEstimate] = []
        assistants = sorted({str(b["assistant"]) for b in label_sql.batches(self._store)})
        for assistant in assistants:
            batch_id = labelled_batch(self._store, assistant)
            if batch_id is None:
                continue
            for q in estimate_batch(self._store, batch_id, confidence=self._cfg.confidence):
                self._export(q)
                done.append(q)
        log.info("quality estimate run", started=started.isoformat(), estimates=len(done))
        self.last_run = done
        return done

    def _export(self, q: QualityEstimate) -> None:
        e = q.estimates
        for suffix, interval in (("", e.ppi), ("_judge_only", e.judge_only),
                                 ("_labels_only", e.labels_only)):  # fmt: skip
            if interval.point is None or interval.lower is None or interval.upper is None:
                continue
            self._metrics.record_quality_estimate(
                q.assistant, q.signal + suffix, interval.point, interval.lower, interval.upper
            )
