"""The severe rate of cases corrected by human case labels, per assistant and signal.

The case-level twin of ``quality_estimate``: a signal is a case metric (its band) or
``case_band``; "severe" is the outcome. The labelled set is a case labelling batch
(``casewatch labels export --cases``: a uniform random sample of the assistant's scored cases in
a frame), its human bands against the judge's bands recorded when drawn; the unlabelled set is
the rest of that frame as the case judge scored it. ``monitor.stats.ppi`` gives the corrected
(PPI++), judge-only and labels-only rates; the anytime-valid sequence runs over every labelled
case batch of the assistant, as for turns. ``casewatch estimate --cases`` prints them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from monitor.jobs.quality_estimate import SEVERE, QualityEstimate
from monitor.reports.case_label_files import CASE_ID, CASE_LABEL_KEYS
from monitor.reports.label_files import consensus
from monitor.stats.confidence_sequence import SequenceBounds, running_sequence
from monitor.stats.ppi import WeightedTerms, rate_estimates, weighted_terms
from monitor.storage import case_labels as case_sql
from monitor.storage.store import Store


def labelled_case_batch(
    store: Store, assistant: str, batch_id: str | None = None
) -> str | None:
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
