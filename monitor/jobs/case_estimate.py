"""The severe rate of cases corrected by human case labels, per assistant and signal.

The case-level twin of ``quality_estimate``: a signal is a case metric (its band) or
``case_band``; "severe" is the outcome. The labelled set is a case labelling batch
(``casewatch labels export --cases``: a uniform random sample of the assistant's scored cases in
a frame), its human bands against the judge's bands recorded when drawn; the unlabelled set is
the rest of that frame as the case judge scored it. ``monitor.stats.ppi`` gives the corrected
(PPI++), judge-only and labels-only rates; the anytime-valid sequence runs over every labelled
case batch of the assistant, as for turns. ``casewatch estimate --cases`` prints them once; the
``case_quality_estimate`` job exports the newest labelled case batch's on the quality-estimate
gauges, under the signals ``case_band`` and ``case_<case metric>`` (``export_signal``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import structlog

from monitor.config.quality_estimate import QualityEstimateConfig
from monitor.jobs.quality_estimate import SEVERE, QualityEstimate
from monitor.jobs.recorders import QualityEstimateAnytimeRecorder, QualityEstimateRecorder
from monitor.metrics.exporter import Metrics
from monitor.reports.case_label_files import CASE_BAND, CASE_ID, CASE_LABEL_KEYS
from monitor.reports.label_files import consensus
from monitor.stats.confidence_sequence import SequenceBounds, running_sequence
from monitor.stats.ppi import WeightedTerms, rate_estimates, weighted_terms
from monitor.storage import case_labels as case_sql
from monitor.storage.store import Store

log = structlog.get_logger(__name__)


def export_signal(signal: str) -> str:
    """The gauges' ``signal`` of a case signal: ``case_band``, or ``case_<case metric>`` (so a
    case metric is never read as a turn metric of the same gauge)."""
    return signal if signal == CASE_BAND else f"case_{signal}"


def labelled_case_batch(store: Store, assistant: str, batch_id: str | None = None) -> str | None:
    """``batch_id`` if given, else the assistant's newest case batch holding labels."""
    if batch_id is not None:
        return batch_id
    for batch in reversed(case_sql.case_batches(store, assistant)):
        if case_sql.stored_case_labels(store, [batch["id"]]):
            return str(batch["id"])
    return None


def _frame(store: Store, batch: dict[str, Any]) -> list[case_sql.CaseFrameRow]:
    end = batch["frame_end"] or batch["created_at"]
    return case_sql.case_frame(store, batch["assistant"], batch["frame_start"], end)


def case_batch_terms(store: Store, batch_id: str, signal: str) -> WeightedTerms | None:
    """The batch's inverse-probability-weighted terms for one signal (None: nobody labelled
    it). Every drawn case had probability size / population; cases drawn but not labelled yet
    are taken as missing at random (each label's probability times the share labelled)."""
    batch = case_sql.case_batch(store, batch_id)
    if batch is None:
        raise KeyError(batch_id)
    human = consensus(case_sql.stored_case_labels(store, [batch_id]), CASE_ID)
    drawn = {c: b for (_b, c), b in case_sql.case_batch_items(store, [batch_id]).items()}
    share = float(batch["size"]) / max(1, int(batch["population"]))
    labelled = {c for c, labels in human.items() if signal in labels and c in drawn}
    if not labelled:
        return None
    chance = share * len(labelled) / len(drawn)
    f, xi, y, pi = [], [], [], []
    seen = set()
    for row in _frame(store, batch):
        seen.add(row.conversation_id)
        bands = drawn.get(row.conversation_id, row.bands)
        on = row.conversation_id in labelled
        f.append(float(bands.get(signal) == SEVERE))
        xi.append(on)
        y.append(float(on and human[row.conversation_id][signal].value == SEVERE))
        pi.append(chance if on else 1.0)
    for c in labelled - seen:  # gone from the frame since (purged): still a labelled draw
        f.append(float(drawn[c].get(signal) == SEVERE))
        xi.append(True)
        y.append(float(human[c][signal].value == SEVERE))
        pi.append(chance)
    return weighted_terms(f, xi, y, pi)


def estimate_case_batch(
    store: Store,
    batch_id: str,
    signals: Sequence[str] = CASE_LABEL_KEYS,
    confidence: float = 0.95,
) -> list[QualityEstimate]:
    """One estimate per signal people labelled in the case batch (PPI++ on a uniform draw)."""
    batch = case_sql.case_batch(store, batch_id)
    if batch is None:
        raise KeyError(batch_id)
    human = consensus(case_sql.stored_case_labels(store, [batch_id]), CASE_ID)
    drawn = {c: b for (_b, c), b in case_sql.case_batch_items(store, [batch_id]).items()}
    frame = _frame(store, batch)
    out = []
    for signal in signals:
        pairs = [
            (labels[signal].value == SEVERE, drawn[c].get(signal) == SEVERE)
            for c, labels in human.items()
            if signal in labels and c in drawn
        ]
        if not pairs:
            continue
        unlabelled = [
            r.bands.get(signal) == SEVERE for r in frame if r.conversation_id not in human
        ]
        est = rate_estimates(
            [float(y) for y, _ in pairs],
            [float(f) for _, f in pairs],
            [float(g) for g in unlabelled],
            confidence=confidence,
        )
        out.append(
            QualityEstimate(
                str(batch["assistant"]), signal, batch_id, len(frame), len(pairs), est, "uniform"
            )
        )
    return out


def anytime_case_estimate(
    store: Store,
    assistant: str,
    signal: str,
    *,
    confidence: float = 0.95,
    tightest_at: int = 10,
) -> SequenceBounds | None:
    """The anytime-valid sequence at its newest look over every labelled case batch of the
    assistant, oldest first, each batch's lambda fitted on the batches before it."""
    estimates: list[float] = []
    errors: list[float] = []
    earlier: list[WeightedTerms] = []
    for b in case_sql.case_batches(store, assistant):
        terms = case_batch_terms(store, str(b["id"]), signal)
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


class CaseQualityEstimateJob:
    """Exports each assistant's newest labelled case batch's estimates, with the anytime
    interval, on ``casewatch_quality_estimate`` / ``_anytime`` (read-only on the store)."""

    name = "case_quality_estimate"

    def __init__(self, config: QualityEstimateConfig, store: Store, metrics: Metrics) -> None:
        self._cfg = config
        self._store = store
        self._metrics = QualityEstimateRecorder(metrics)
        self._anytime = QualityEstimateAnytimeRecorder(metrics)
        self.interval_seconds = config.interval_seconds
        self.last_run: list[QualityEstimate] = []

    def close(self) -> None:
        pass  # holds nothing beyond the store, which the daemon closes

    def run(self) -> None:
        self.run_once()

    def run_once(self) -> list[QualityEstimate]:
        done: list[QualityEstimate] = []
        cfg = self._cfg
        for assistant in sorted({str(b["assistant"]) for b in case_sql.case_batches(self._store)}):
            batch_id = labelled_case_batch(self._store, assistant)
            if batch_id is None:
                continue
            for q in estimate_case_batch(self._store, batch_id, confidence=cfg.confidence):
                anytime = anytime_case_estimate(self._store, assistant, q.signal,
                                                confidence=cfg.confidence,
                                                tightest_at=cfg.anytime_tightest_at)  # fmt: skip
                q = replace(q, anytime=anytime)
                self._export(q)
                done.append(q)
        log.info("case quality estimate run", estimates=len(done))
        self.last_run = done
        return done

    def _export(self, q: QualityEstimate) -> None:
        e, signal = q.estimates, export_signal(q.signal)
        for suffix, interval in (("", e.ppi), ("_judge_only", e.judge_only),
                                 ("_labels_only", e.labels_only)):  # fmt: skip
            if interval.point is None or interval.lower is None or interval.upper is None:
                continue
            self._metrics.record_quality_estimate(
                q.assistant, signal + suffix, interval.point, interval.lower, interval.upper
            )
        if q.anytime is not None:
            a = q.anytime
            self._anytime.record_anytime(q.assistant, signal, a.point, a.lower, a.upper)
