"""The severe rate corrected by human labels, per assistant and signal, from the store.

A signal is a metric (its band) or ``turn_band``; "severe" is the outcome. The labelled set is
a labelling batch (``casewatch labels export``: a uniform random sample of the assistant's
scored turns in a frame), its human bands against the judge's bands recorded when drawn; the
unlabelled set is the rest of that frame as the judge scored it. ``monitor.stats.ppi``
turns them into the corrected rate, the judge-only and the labels-only rates. The job exports
the newest labelled batch's estimates as ``casewatch_quality_estimate``; ``casewatch estimate``
prints the same thing once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import structlog

from monitor.config.quality_estimate import QualityEstimateConfig
from monitor.jobs.recorders import QualityEstimateAnytimeRecorder, QualityEstimateRecorder
from monitor.metrics.exporter import Metrics
from monitor.reports.label_files import LABEL_KEYS, consensus
from monitor.runtime.clock import Clock, SystemClock
from monitor.schema.turn import Band
from monitor.stats.confidence_sequence import SequenceBounds, running_sequence
from monitor.stats.ppi import (
    Interval,
    RateEstimates,
    WeightedTerms,
    rate_estimates,
    weighted_interval,
    weighted_terms,
)
from monitor.stats.weighted_rates import hajek
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
    strategy: str = "uniform"
    anytime: SequenceBounds | None = None  # over every labelled batch of the assistant

    def to_dict(self) -> dict[str, Any]:
        anytime = self.anytime
        return {
            "strategy": self.strategy,
            "anytime": None
            if anytime is None
            else {
                "point": anytime.point,
                "lower": anytime.lower,
                "upper": anytime.upper,
                "batches": anytime.looks,
            },
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
        if batch.get("strategy") == label_sql.TARGETED:
            continue  # picked, not drawn: no estimate from it
        if label_sql.stored_labels(store, [batch["id"]]):
            return str(batch["id"])
    return None


def _frame(store: Store, batch: dict[str, Any]) -> list[label_sql.FrameRow]:
    end = batch["frame_end"] or batch["created_at"]
    return list(label_sql.judged_frame(store, batch["assistant"], batch["frame_start"], end))


def batch_terms(store: Store, batch_id: str, signal: str) -> WeightedTerms | None:
    """The batch's inverse-probability-weighted terms for one signal (None: nobody labelled
    it). Labels still missing from drawn turns are taken as missing at random: each labelled
    turn's probability is its drawing probability times the share of drawn turns labelled."""
    batch = label_sql.batch(store, batch_id)
    if batch is None:
        raise KeyError(batch_id)
    human = consensus(label_sql.stored_labels(store, [batch_id]))
    drawn = {e: bands for (_b, e), bands in label_sql.batch_items(store, [batch_id]).items()}
    share = float(batch["size"]) / max(1, int(batch["population"]))
    probs = {
        e: (share if p is None else p)
        for (_b, e), p in label_sql.item_probabilities(store, [batch_id]).items()
    }
    labelled = {e for e, labels in human.items() if signal in labels and e in drawn}
    if not labelled:
        return None
    completion = len(labelled) / len(drawn)
    f, xi, y, pi, frame_w = [], [], [], [], []
    seen = set()
    for row in _frame(store, batch):
        seen.add(row.event_id)
        frame_w.append(1.0 if row.judge_inclusion is None else 1.0 / row.judge_inclusion)
        bands = drawn.get(row.event_id, row.bands)
        f.append(float(bands.get(signal) == SEVERE))
        on = row.event_id in labelled
        xi.append(on)
        y.append(float(on and human[row.event_id][signal].value == SEVERE))
        pi.append(probs.get(row.event_id, share) * completion if on else 1.0)
    for e in labelled - seen:  # purged from the frame since: still a labelled draw
        frame_w.append(1.0)  # its judge-draw probability went with the row
        f.append(float(drawn[e].get(signal) == SEVERE))
        xi.append(True)
        y.append(float(human[e][signal].value == SEVERE))
        pi.append(probs.get(e, share) * completion)
    cascade = any(w != 1.0 for w in frame_w)
    return weighted_terms(f, xi, y, pi, frame_w if cascade else None)


def judge_only_over_traffic(
    frame: Sequence[label_sql.FrameRow],
    drawn: Mapping[str, Mapping[str, str]],
    human: Mapping[str, Mapping[str, Band]],
    signal: str,
    confidence: float,
) -> Interval:
    """The judge's own severe rate over the traffic its frame stands for (Hajek): each frame
    turn's call (its band when drawn for labelling, else as stored) weighted by 1 / the
    probability the cascade drew it for the judge (1: drawn uniformly, or by a rule), and a
    labelled turn purged from the frame since with weight 1, as ``batch_terms`` counts it."""
    seen = {r.event_id for r in frame}
    calls = [drawn.get(r.event_id, r.bands).get(signal) == SEVERE for r in frame]
    inclusion: list[float | None] = [r.judge_inclusion for r in frame]
    for e, labels in human.items():
        if signal in labels and e in drawn and e not in seen:
            calls.append(drawn[e].get(signal) == SEVERE)
            inclusion.append(None)
    return hajek(calls, inclusion).interval(confidence)


def estimate_batch(
    store: Store, batch_id: str, signals: Sequence[str] = LABEL_KEYS, confidence: float = 0.95
) -> list[QualityEstimate]:
    """One estimate per signal people labelled in the batch: PPI++ for a uniform batch, the
    inverse-probability-weighted estimate for one drawn by uncertainty."""
    batch = label_sql.batch(store, batch_id)
    if batch is None:
        raise KeyError(batch_id)
    strategy = str(batch.get("strategy") or "uniform")
    human = consensus(label_sql.stored_labels(store, [batch_id]))
    drawn = {e: bands for (_b, e), bands in label_sql.batch_items(store, [batch_id]).items()}
    frame = _frame(store, batch)
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
        cascade = any(r.judge_inclusion is not None for r in frame)
        if strategy != "uniform" or cascade:
            # Labels drawn with unequal probabilities: the plain labels-only mean and PPI++
            # would be biased towards the unsure turns; weight each label by 1 / probability.
            # So are turns the cascade drew for the judge: each weighs 1 / its probability,
            # in the judge-only rate too (the judged frame over-draws the risky turns).
            terms = batch_terms(store, batch_id, signal)
            if terms is not None:
                weighted, lam = weighted_interval(terms, confidence=confidence)
                labels_only, _ = weighted_interval(terms, confidence=confidence, lam=0.0)
                judge_only = (
                    judge_only_over_traffic(frame, drawn, human, signal, confidence)
                    if cascade
                    else est.judge_only
                )
                est = RateEstimates(weighted, judge_only, labels_only, lam, confidence)
        out.append(
            QualityEstimate(
                str(batch["assistant"]), signal, batch_id, len(frame), len(pairs), est, strategy
            )
        )
    return out


def anytime_estimate(
    store: Store,
    assistant: str,
    signal: str,
    *,
    confidence: float = 0.95,
    tightest_at: int = 10,
) -> SequenceBounds | None:
    """The anytime-valid sequence at its newest look, over every labelled batch of the
    assistant, oldest first; each batch's lambda is fitted on the batches before it (so it is
    fixed before the batch is seen, as the sequence's guarantee needs)."""
    estimates: list[float] = []
    errors: list[float] = []
    earlier: list[WeightedTerms] = []
    for b in label_sql.batches(store, assistant):
        if b.get("strategy") == label_sql.TARGETED:
            continue
        terms = batch_terms(store, str(b["id"]), signal)
        if terms is None or terms.labelled < 2:
            continue
        lam = (
            WeightedTerms(
                np.concatenate([t.a for t in earlier]),
                np.concatenate([t.b for t in earlier]),
                sum(t.labelled for t in earlier),
            ).tuned_lambda()
            if earlier
            else 1.0
        )
        point, se = terms.estimate(lam)
        estimates.append(point)
        errors.append(se)
        earlier.append(terms)
    if not estimates:
        return None
    return running_sequence(estimates, errors, confidence=confidence, tightest_at=tightest_at)[-1]


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
        self._anytime = QualityEstimateAnytimeRecorder(metrics)
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
                q = replace(
                    q,
                    anytime=anytime_estimate(
                        self._store,
                        assistant,
                        q.signal,
                        confidence=self._cfg.confidence,
                        tightest_at=self._cfg.anytime_tightest_at,
                    ),
                )
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
        if q.anytime is not None:
            a = q.anytime
            self._anytime.record_anytime(q.assistant, q.signal, a.point, a.lower, a.upper)
