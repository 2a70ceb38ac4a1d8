"""What ``casewatch cascade check`` prints: the cheap look against the LLM judge, per cell and
overall, and whether the cascade pays on this traffic (pure: a document and its text)."""

from __future__ import annotations

from typing import Any

from monitor.stats.cheap_agreement import NO_SAVING_BELOW, PAYS_FROM, Agreement

_ADVICE = {
    "pays": "the cheap look follows the LLM judge: sampling.strategy: cascade should need "
    "fewer LLM calls for the same detection delay (docs/cascade.md)",
    "marginal": "the cheap look follows the LLM judge a little: expect a small saving at "
    "best; compare both strategies on your budget before switching",
    "no saving": "the cheap look does not follow the LLM judge here: keep "
    "sampling.strategy: uniform (the cascade would fall back to it, at no saving)",
    "unknown": "the pairs hold no severe call, or no clean one: judge more turns first",
}


def check_doc(result: Agreement, *, assistant: str | None) -> dict[str, Any]:
    return {
        "assistant": assistant,
        "pairs": result.pairs,
        "auroc": result.auroc,
        "llm_severe_share": result.llm_severe_share,
        "cheap_severe_share": result.cheap_severe_share,
        "verdict": result.verdict,
        "thresholds": {"pays_from": PAYS_FROM, "no_saving_below": NO_SAVING_BELOW},
        "cells": [
            {
                "cell": c.cell,
                "judged": c.judged,
                "traffic_weight": c.weight,
                "llm_severe_rate": c.llm_severe_rate,
            }
            for c in result.cells
        ],
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def render_check(doc: dict[str, Any]) -> str:
    who = doc["assistant"] or "every assistant"
    auroc = "-" if doc["auroc"] is None else f"{doc['auroc']:.2f}"
    lines = [
        f"cheap look vs LLM judge, {who}: {doc['pairs']} judged turns",
        f"{'cheap band':<12}{'judged':>8}{'LLM severe':>12}",
    ]
    for c in doc["cells"]:
        lines.append(f"{c['cell']:<12}{c['judged']:>8}{_pct(c['llm_severe_rate']):>12}")
    lines += [
        f"AUROC of the cheap band for the LLM's severe call: {auroc}",
        f"severe share (weighted): LLM judge {_pct(doc['llm_severe_share'])}, "
        f"cheap look {_pct(doc['cheap_severe_share'])}",
        f"verdict: {doc['verdict']}: {_ADVICE[doc['verdict']]}",
    ]
    return "\n".join(lines)
