"""How far a judge can be trusted (pure; no I/O).

Against people (the Case-Aware paper's §8.7): per metric, the judge's severity band vs the human
band on the same turns: accuracy, Cohen's kappa, macro-F1 and the 4×4 confusion matrix (rows
human, columns judge, bands worst first), plus the binary "problem" agreement the paper reports
(severe/moderate vs minor/none). Against another judge (the Case-Aware paper's §8.4, K.2):
Spearman ρ and Kendall τ per metric and on S_final over the turns both judges scored, and on
S_final per conversation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from monitor.schema.turn import METRICS, Band, Verdict
from monitor.stats.lazy import LazyModule
from monitor.stats.paired import Correlation, by_conversation, finite, quiet, rank_correlation

_metrics = LazyModule("sklearn.metrics")  # imported on first use: see monitor.stats.lazy

BANDS: tuple[str, ...] = tuple(b.value for b in Band)  # severe .. none
TURN_KEY = "turn_band"  # a human label for the whole turn, compared with Verdict.turn_band
_PROBLEM = {Band.SEVERE.value, Band.MODERATE.value}


@dataclass(frozen=True)
class BandAgreement:
    metric: str
    n: int
    accuracy: float | None = None
    kappa: float | None = None
    macro_f1: float | None = None
    problem_accuracy: float | None = None
    confusion: tuple[tuple[int, ...], ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class HumanAgreement:
    labelled: int  # events with human labels
    matched: int  # ... of which the judge scored
    missing: int  # ... of which no verdict exists
    judge_failed: int  # ... of which the verdict is judge_failed
    metrics: tuple[BandAgreement, ...]
    unknown_keys: tuple[str, ...]
    unit: str = "turns"  # what was labelled: turns, or cases (``case_agreement``)

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["bands"] = list(BANDS)
        doc["confusion_axes"] = "rows: human band, columns: judge band"
        doc["metrics"] = {m.metric: asdict(m) for m in self.metrics}
        return doc


def band_agreement(metric: str, human: list[str], judge: list[str]) -> BandAgreement:
    """Agreement of two band sequences over the same turns."""
    n = len(human)
    if n == 0:
        return BandAgreement(metric, 0, notes=("no labelled turn was scored",))
    notes: list[str] = []
    present = sorted(set(human) | set(judge), key=BANDS.index)
    if len(present) == 1:
        kappa = None
        notes.append(f"only the band {present[0]!r} occurs: kappa undefined")
    else:
        k = quiet(
            "kappa", lambda: _metrics.cohen_kappa_score(human, judge, labels=list(BANDS)), notes
        )
        kappa = finite(k)
    f1 = quiet(
        "macro-F1",
        # Macro over the bands that occur: a band nobody used would count as F1 = 0.
        lambda: _metrics.f1_score(human, judge, labels=present, average="macro", zero_division=0),
        notes,
    )
    problem = sum((h in _PROBLEM) == (j in _PROBLEM) for h, j in zip(human, judge, strict=True))
    matrix = _metrics.confusion_matrix(human, judge, labels=list(BANDS))
    return BandAgreement(
        metric,
        n,
        accuracy=finite(_metrics.accuracy_score(human, judge)),
        kappa=kappa,
        macro_f1=finite(f1),
        problem_accuracy=problem / n,
        confusion=tuple(tuple(int(x) for x in row) for row in matrix),
        notes=tuple(notes),
    )


def agreement(
    judged: Iterable[Verdict], human_labels: Mapping[str, Mapping[str, Band]]
) -> HumanAgreement:
    """Judge bands vs human bands. ``human_labels``: event_id → {metric or 'turn_band': band}."""
    verdicts = {v.event_id: v for v in judged}
    known = {*METRICS, TURN_KEY}
    unknown = sorted({k for labels in human_labels.values() for k in labels} - known)
    pairs: dict[str, tuple[list[str], list[str]]] = {k: ([], []) for k in (*METRICS, TURN_KEY)}
    matched = missing = failed = 0
    for event_id, labels in human_labels.items():
        v = verdicts.get(event_id)
        if v is None:
            missing += 1
            continue
        if v.status != "ok":
            failed += 1
            continue
        matched += 1
        for key, human_band in labels.items():
            judge_band = v.turn_band if key == TURN_KEY else v.metric_bands.get(key)
            if key in pairs and judge_band is not None:
                pairs[key][0].append(Band(human_band).value)
                pairs[key][1].append(judge_band.value)
    rows = tuple(band_agreement(k, h, j) for k, (h, j) in pairs.items() if h)
    return HumanAgreement(
        labelled=len(human_labels),
        matched=matched,
        missing=missing,
        judge_failed=failed,
        metrics=rows,
        unknown_keys=tuple(unknown),
    )


def case_agreement(
    judge_bands: Mapping[str, Mapping[str, str]],
    human_labels: Mapping[str, Mapping[str, Band]],
    keys: Iterable[str],
) -> HumanAgreement:
    """Judge vs human bands over labelled cases, per key (a case metric or ``case_band``).
    ``judge_bands``: conversation id -> the judge's bands when the case was drawn (only scored
    cases are drawn); ``human_labels``: conversation id -> {key: band}."""
    order = tuple(keys)
    unknown = sorted({k for labels in human_labels.values() for k in labels} - set(order))
    pairs: dict[str, tuple[list[str], list[str]]] = {k: ([], []) for k in order}
    matched = missing = 0
    for case_id, labels in human_labels.items():
        bands = judge_bands.get(case_id)
        if bands is None:
            missing += 1
            continue
        matched += 1
        for key, human_band in labels.items():
            judge_band = bands.get(key)
            if key in pairs and judge_band is not None:
                pairs[key][0].append(Band(human_band).value)
                pairs[key][1].append(Band(judge_band).value)
    rows = tuple(band_agreement(k, h, j) for k, (h, j) in pairs.items() if h)
    return HumanAgreement(
        labelled=len(human_labels),
        matched=matched,
        missing=missing,
        judge_failed=0,
        metrics=rows,
        unknown_keys=tuple(unknown),
        unit="cases",
    )


# ---------------------------------------------------------------- judge vs judge


@dataclass(frozen=True)
class JudgeAgreement:
    shared: int  # turns both judges scored
    only_a: int
    only_b: int
    judge_failed: int  # shared event ids where either judge failed
    s_final: Correlation
    s_final_conversations: Correlation
    metrics: tuple[tuple[str, Correlation], ...]

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["metrics"] = {m: asdict(c) for m, c in self.metrics}
        return doc


def judge_agreement(a: Iterable[Verdict], b: Iterable[Verdict]) -> JudgeAgreement:
    """Rank agreement of two judges over the event ids both scored."""
    va = {v.event_id: v for v in a}
    vb = {v.event_id: v for v in b}
    common = sorted(set(va) & set(vb))
    both = [e for e in common if va[e].status == "ok" and vb[e].status == "ok"]
    s_a = [va[e].s_final or 0.0 for e in both]
    s_b = [vb[e].s_final or 0.0 for e in both]
    conv_a = by_conversation(va[e] for e in both).s_final
    conv_b = by_conversation(vb[e] for e in both).s_final
    convs = sorted(conv_a)
    metrics = tuple(
        (
            m,
            rank_correlation(
                [va[e].metric_scores[m] for e in both], [vb[e].metric_scores[m] for e in both]
            ),
        )
        for m in METRICS
    )
    return JudgeAgreement(
        shared=len(both),
        only_a=len(set(va) - set(vb)),
        only_b=len(set(vb) - set(va)),
        judge_failed=len(common) - len(both),
        s_final=rank_correlation(s_a, s_b),
        s_final_conversations=rank_correlation(
            [conv_a[c] for c in convs], [conv_b[c] for c in convs]
        ),
        metrics=metrics,
    )
