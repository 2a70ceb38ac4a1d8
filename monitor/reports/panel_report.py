"""Does arbitration pay? Agreement before/after arbitration and the arbiter budget (pure).

DAFE Fig. 5 style, on a panel's granular verdicts and human band labels: per metric,
accuracy, Cohen's kappa and macro-F1 against people for

- each primary judge alone (its own Judgment's scores),
- the panel BEFORE arbitration: the primaries' mean on the turns where they agreed (with its
  coverage: on disputed turns the primaries alone have no answer),
- the panel AFTER arbitration: the final scores on every turn the panel scored;

plus the disagreement rate, the arbiter calls as a share of turns and the panel's cost
relative to running all three judges on every turn. No I/O: the CLI reads the files.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from monitor.judging import arbitration
from monitor.schema.turn import METRICS, Band, Judgment, Verdict
from monitor.scoring import turn as scoring
from monitor.stats.agreement import TURN_KEY, BandAgreement, band_agreement

POOLED = "all_metrics"  # every (turn, metric) pair of the eight metrics in one sample
BEFORE = "panel before arbitration"
AFTER = "panel after arbitration"

EvaluatorKind = Literal["primary", "before", "after"]


@dataclass(frozen=True)
class EvaluatorAgreement:
    name: str
    kind: EvaluatorKind
    scored: int  # labelled panel turns this evaluator has scores for
    coverage: float | None  # scored / labelled panel turns
    metrics: tuple[BandAgreement, ...]  # per labelled key, then POOLED

    def row(self, metric: str) -> BandAgreement | None:
        return next((m for m in self.metrics if m.metric == metric), None)


@dataclass(frozen=True)
class PanelReport:
    turns: int  # panel verdicts (two primaries)
    labelled: int  # ... with human labels
    judge_failed: int
    disagreements: int
    disagreement_rate: float
    arbiter_calls: int
    arbiter_call_share: float
    cost_usd: float
    three_judges_cost_usd: float
    # cost / cost of all three judges on every turn; on calls when no judge reported a cost.
    cost_ratio: float
    cost_basis: Literal["usd", "calls"]
    evaluators: tuple[EvaluatorAgreement, ...]

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["evaluators"] = {
            e.name: {
                "kind": e.kind,
                "scored": e.scored,
                "coverage": e.coverage,
                "metrics": {m.metric: asdict(m) for m in e.metrics},
            }
            for e in self.evaluators
        }
        return doc


# ---------------------------------------------------------------- building the report


def _panel_verdicts(verdicts: Iterable[Mapping[str, Any] | Verdict]) -> list[Verdict]:
    latest: dict[str, Verdict] = {}
    for item in verdicts:
        v = item if isinstance(item, Verdict) else Verdict.model_validate(item)
        if sum(1 for j in v.judgments if j.role == "primary") == 2:
            latest[v.event_id] = v  # a replayed event: the last verdict wins
    return list(latest.values())


def _primaries(v: Verdict) -> list[Judgment]:
    return [j for j in v.judgments if j.role == "primary"]


def _score_map(j: Judgment) -> dict[str, float] | None:
    return j.scores.score_map() if j.ok and j.scores is not None else None


def _agreed_mean(v: Verdict) -> dict[str, float] | None:
    """The primaries' mean when both answered and the panel did not flag a dispute."""
    a, b = (_score_map(j) for j in _primaries(v))
    if a is None or b is None or v.arbitration_trigger is not None:
        return None
    return arbitration.combine_agree(a, b)


class _Pairs:
    """Human vs evaluator bands, collected per labelled key."""

    def __init__(self, keys: Sequence[str]) -> None:
        self.keys = list(keys)
        self.pairs: dict[str, tuple[list[str], list[str]]] = {k: ([], []) for k in keys}
        self.scored = 0

    def add(
        self,
        labels: Mapping[str, str],
        scores: Mapping[str, float] | None,
        weights: Mapping[str, float],
        critical: Sequence[str],
    ) -> None:
        if scores is None:
            return
        self.scored += 1
        for key, human in labels.items():
            if key == TURN_KEY:
                predicted = scoring.turn_band(scores, weights, critical)
            elif key in METRICS:
                predicted = scoring.band(scores[key])
            else:
                continue
            self.pairs[key][0].append(human)
            self.pairs[key][1].append(predicted.value)

    def rows(self) -> tuple[BandAgreement, ...]:
        rows = [band_agreement(k, h, j) for k, (h, j) in self.pairs.items() if h]
        pooled_h = [b for k in METRICS if k in self.pairs for b in self.pairs[k][0]]
        pooled_j = [b for k in METRICS if k in self.pairs for b in self.pairs[k][1]]
        rows.append(band_agreement(POOLED, pooled_h, pooled_j))
        return tuple(rows)


def _cost(verdicts: Sequence[Verdict]) -> tuple[float, float, float, Literal["usd", "calls"]]:
    """(panel USD, three-judges USD, ratio, basis) — ratio on call counts when nothing cost."""
    judgments = [j for v in verdicts for j in v.judgments]
    actual = math.fsum(j.cost_usd for j in judgments)
    if actual == 0.0:
        # No prices configured (or a free local endpoint): compare calls instead of dollars.
        return 0.0, 0.0, len(judgments) / (3 * len(verdicts)), "calls"
    arbiter_costs = [j.cost_usd for j in judgments if j.role == "arbiter"]
    # An arbiter that never ran is priced like an average call of the panel.
    per_arbiter_call = statistics.fmean(arbiter_costs or [j.cost_usd for j in judgments])
    three_judges = math.fsum(
        math.fsum(j.cost_usd for j in _primaries(v))
        + (
            math.fsum(j.cost_usd for j in v.judgments if j.role == "arbiter")
            if any(j.role == "arbiter" for j in v.judgments)
            else per_arbiter_call
        )
        for v in verdicts
    )
    return actual, three_judges, actual / three_judges, "usd"


def panel_report(
    verdicts: Iterable[Mapping[str, Any] | Verdict],
    human_labels: Mapping[str, Mapping[str, str | Band]],
    *,
    weights: Mapping[str, float] = scoring.DEFAULT_PROFILE,
    critical: Sequence[str] = scoring.DEFAULT_CRITICAL_METRICS,
) -> PanelReport:
    """The report over the verdicts of a two-primary panel (dicts of the granular JSONL).

    ``human_labels``: event_id → {metric or 'turn_band': band}. ``weights``/``critical`` only
    matter for a 'turn_band' label (the turn band of a primary alone is recomputed). Verdicts
    of a single judge are ignored; none of a panel at all is a ValueError.
    """
    panel = _panel_verdicts(verdicts)
    if not panel:
        raise ValueError("no verdict of a two-primary panel: nothing to compare")
    labels = {
        e: {k: Band(b).value for k, b in lab.items() if k in METRICS or k == TURN_KEY}
        for e, lab in human_labels.items()
    }
    keys = [k for k in (*METRICS, TURN_KEY) if any(k in lab for lab in labels.values())]
    names = list(dict.fromkeys(j.judge for v in panel for j in _primaries(v)))
    primary_pairs = {n: _Pairs(keys) for n in names}
    before, after = _Pairs(keys), _Pairs(keys)
    labelled = 0
    for v in panel:
        lab = labels.get(v.event_id)
        if lab is None:
            continue
        labelled += 1
        for j in _primaries(v):
            primary_pairs[j.judge].add(lab, _score_map(j), weights, critical)
        before.add(lab, _agreed_mean(v), weights, critical)
        after.add(lab, v.metric_scores if v.status == "ok" else None, weights, critical)

    def evaluator(name: str, kind: EvaluatorKind, pairs: _Pairs) -> EvaluatorAgreement:
        coverage = pairs.scored / labelled if labelled else None
        return EvaluatorAgreement(name, kind, pairs.scored, coverage, pairs.rows())

    evaluators = (
        *(evaluator(n, "primary", p) for n, p in primary_pairs.items()),
        evaluator(BEFORE, "before", before),
        evaluator(AFTER, "after", after),
    )
    n = len(panel)
    disagreements = sum(1 for v in panel if v.arbitration_trigger is not None)
    arbiter_calls = sum(1 for v in panel for j in v.judgments if j.role == "arbiter")
    actual, three, ratio, basis = _cost(panel)
    return PanelReport(
        turns=n,
        labelled=labelled,
        judge_failed=sum(1 for v in panel if v.status != "ok"),
        disagreements=disagreements,
        disagreement_rate=disagreements / n,
        arbiter_calls=arbiter_calls,
        arbiter_call_share=arbiter_calls / n,
        cost_usd=actual,
        three_judges_cost_usd=three,
        cost_ratio=ratio,
        cost_basis=basis,
        evaluators=evaluators,
    )
