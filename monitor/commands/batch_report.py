"""What ``casewatch judge``, ``casewatch compare`` and ``casewatch agreement`` print: the run's
summary and the tables of a comparison and of agreement, as text (the commands echo it; their
``--json`` is the results' own ``to_dict``)."""

from __future__ import annotations

from collections.abc import Sequence

from monitor.batch.summary import BatchSummary
from monitor.commands.output import MISSING, num, p_value, percent, table
from monitor.reports.panel_report import PanelReport
from monitor.schema.turn import Band
from monitor.stats.agreement import BANDS, HumanAgreement, JudgeAgreement
from monitor.stats.case_comparison import CaseComparison
from monitor.stats.comparison import Comparison
from monitor.stats.paired import Correlation, PairedTest


def _notes(notes: Sequence[str]) -> list[str]:
    return [f"note: {note}" for note in dict.fromkeys(notes)]  # de-duplicated, in order


def summary_text(s: BatchSummary) -> str:
    """``casewatch judge``'s counts, then a table per assistant when it judged any."""
    lines = [
        f"read {s.read}  judged {s.judged}  judge_failed {s.judge_failed}  "
        f"skipped_existing {s.skipped_existing}  duplicates {s.duplicates}  "
        f"rejected {s.rejected}  ({s.elapsed_seconds:.1f} s, {s.turns_per_second:.1f} turns/s)"
    ]
    if s.per_assistant:
        rows = [
            [
                name,
                str(t.n),
                str(t.judge_failed),
                num(t.mean_s_final),
                *(str(t.bands.get(b.value, 0)) for b in Band),
            ]
            for name, t in sorted(s.per_assistant.items())
        ]
        header = ["assistant", "n", "judge_failed", "mean S_final", *(b.value for b in Band)]
        lines.append(table(header, rows))
    return "\n".join(lines)


def _paired_row(label: str, t: PairedTest) -> list[str]:
    ci = MISSING if t.ci_low is None else f"[{t.ci_low:+.4f}, {t.ci_high:+.4f}]"
    delta = MISSING if t.mean_delta is None else f"{t.mean_delta:+.4f}"
    return [
        label,
        str(t.n),
        num(t.mean_a),
        num(t.mean_b),
        delta,
        p_value(t.wilcoxon_p),
        p_value(t.t_p),
        ci,
    ]


def comparison_text(c: Comparison) -> str:
    """``casewatch compare``: both sides, the pairing, one row per score, then the notes."""
    header = ["conversation mean", "n", "mean A", "mean B", "Δ", "Wilcoxon p", "t-test p"]
    ci_head = f"95% CI of Δ ({c.s_final.ci_method or 'n/a'})"
    rows = [_paired_row("S_final", c.s_final)]
    rows += [_paired_row(m.metric, m.test) for m in c.metrics]
    metric_notes = [f"{m.metric}: {n}" for m in c.metrics for n in m.test.notes]
    return "\n".join(
        [
            f"A: {', '.join(c.assistants_a)}  ({c.conversations_a} conversations, "
            f"{c.turns_scored_a} turns scored, {c.judge_failed_a} judge_failed excluded)",
            f"B: {', '.join(c.assistants_b)}  ({c.conversations_b} conversations, "
            f"{c.turns_scored_b} turns scored, {c.judge_failed_b} judge_failed excluded)",
            f"paired conversations: {c.n_pairs} (only in A: {c.only_a}, only in B: {c.only_b}); "
            f"Δ = B − A; weights: {c.weight_profile or 'as judged'}\n",
            table([*header, ci_head], rows),
            *_notes([*c.notes, *c.s_final.notes]),
            *_notes(metric_notes),
        ]
    )


def case_comparison_text(c: CaseComparison) -> str:
    """``casewatch compare --cases``: both sides, the pairing, one row per case score."""
    header = ["case", "n", "mean A", "mean B", "Δ", "Wilcoxon p", "t-test p"]
    ci_head = f"95% CI of Δ ({c.case_score.ci_method or 'n/a'})"
    rows = [_paired_row("case score", c.case_score), _paired_row("resolved", c.resolved)]
    rows += [_paired_row(m.metric, m.test) for m in c.metrics]
    metric_notes = [f"{m.metric}: {n}" for m in c.metrics for n in m.test.notes]
    return "\n".join(
        [
            f"A: {c.assistant_a}  ({c.cases_a} scored cases, their current verdicts)",
            f"B: {c.assistant_b}  ({c.cases_b} scored cases, their current verdicts)",
            f"paired cases: {c.n_pairs} (only in A: {c.only_a}, only in B: {c.only_b}); "
            "Δ = B − A\n",
            table([*header, ci_head], rows),
            *_notes([*c.notes, *c.case_score.notes]),
            *_notes(metric_notes),
        ]
    )


def human_text(h: HumanAgreement) -> str:
    """The judge against human labels: a row per label, then each label's confusion matrix."""
    header = ["label", "n", "accuracy", "kappa", "macro-F1", "problem acc."]
    rows = [
        [
            m.metric,
            str(m.n),
            num(m.accuracy, 3),
            num(m.kappa, 3),
            num(m.macro_f1, 3),
            num(m.problem_accuracy, 3),
        ]
        for m in h.metrics
    ]
    lines = [
        f"judge vs human: {h.labelled} labelled {h.unit}, {h.matched} scored by the judge, "
        f"{h.missing} without a verdict, {h.judge_failed} judge_failed",
        table(header, rows),
    ]
    for m in h.metrics:
        lines += ["", *_confusion_lines(m.metric, m.confusion)]
    lines += _notes([f"{m.metric}: {n}" for m in h.metrics for n in m.notes])
    if h.unknown_keys:
        lines.append(f"note: label keys ignored (not a metric or turn_band): {h.unknown_keys}")
    return "\n".join(lines)


def _confusion_lines(metric: str, confusion: Sequence[Sequence[int]]) -> list[str]:
    """One label's confusion matrix as a table: a row per human band, a column per judge band,
    so the diagonal is agreement and a count right of it is a judge more lenient than people."""
    if not confusion:
        return [f"{metric}: no confusion matrix (no labelled turn scored)"]
    rows = [[f"human {b}", *(str(x) for x in row)] for b, row in zip(BANDS, confusion, strict=True)]
    grid = table([f"{metric}", *(f"judge {b}" for b in BANDS)], rows)
    said = "rows: human band, columns: judge band; right of the diagonal the judge was milder"
    return [f"{metric}: confusion ({said})", *grid.splitlines()]


_PANEL_HEADS = {"before": "before arb.", "after": "after arb."}  # the other columns: judges
_PANEL_STATISTICS = (
    ("accuracy", "accuracy"),
    ("Cohen's kappa", "kappa"),
    ("macro-F1", "macro_f1"),
)


def panel_text(p: PanelReport) -> str:
    """The panel's agreement with people: one table per statistic, evaluators as columns."""
    usd = (
        f", {p.cost_usd:.6f} vs {p.three_judges_cost_usd:.6f} USD" if p.cost_basis == "usd" else ""
    )
    heads = [_PANEL_HEADS.get(e.kind, e.name) for e in p.evaluators]
    blocks = [
        f"panel turns {p.turns} (labelled {p.labelled}, judge_failed {p.judge_failed}); "
        f"disagreement rate {percent(p.disagreement_rate)}; "
        f"arbiter calls {p.arbiter_calls} ({percent(p.arbiter_call_share)} of turns)\n"
        f"cost {p.cost_ratio:.3f} x three judges on every turn (basis: {p.cost_basis}{usd})",
        table(["", *heads], [["coverage", *(percent(e.coverage) for e in p.evaluators)]]),
    ]
    keys = [m.metric for m in p.evaluators[0].metrics]
    for title, field in _PANEL_STATISTICS:
        rows = []
        for key in keys:
            found = [e.row(key) for e in p.evaluators]
            rows.append(
                [key, *(num(getattr(r, field) if r is not None else None, 3) for r in found)]
            )
        blocks.append(table([title, *heads], rows))
    return "\n\n".join(blocks)


def _corr_row(label: str, c: Correlation) -> list[str]:
    rho, tau = num(c.spearman, 3), num(c.kendall, 3)
    return [label, str(c.n), rho, p_value(c.spearman_p), tau, p_value(c.kendall_p)]


def judges_text(j: JudgeAgreement) -> str:
    """One judge against another: rank correlations of S_final and of every metric."""
    rows = [
        _corr_row("S_final (turns)", j.s_final),
        _corr_row("S_final (conversations)", j.s_final_conversations),
        *(_corr_row(m, c) for m, c in j.metrics),
    ]
    notes = [*j.s_final.notes, *j.s_final_conversations.notes]
    notes += [f"{m}: {n}" for m, c in j.metrics for n in c.notes]
    return "\n".join(
        [
            f"judge vs judge: {j.shared} turns scored by both (only first: {j.only_a}, "
            f"only second: {j.only_b}, judge_failed: {j.judge_failed})",
            table(["score", "n", "Spearman ρ", "p", "Kendall τ", "p"], rows),
            *_notes(notes),
        ]
    )
