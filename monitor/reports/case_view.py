"""What ``casewatch inspect case`` prints: a conversation's turns with their verdicts, then each
case verdict (every version, the newest current) with each case judge's reasons (pure; the
rows come from ``monitor.storage.case_queries``)."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from monitor.schema.case import CASE_METRICS

_BAD = ("severe", "moderate")


def case_doc(
    conversation_id: str, turns: Sequence[Mapping[str, Any]], verdicts: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """One JSON-ready document (the ``--json`` output and what ``render_case`` prints)."""
    turn_docs = []
    for t in turns:
        event = t["event"]
        bands = t.get("metric_bands") or {}
        turn_docs.append(
            {
                "event_id": t["event_id"],
                "assistant": t["assistant_name"],
                "turn_index": t["turn_index"],
                "query": event.get("query", ""),
                "answer": event.get("answer", ""),
                "ends_case": bool(event.get("ends_case", False)),
                "status": t.get("status"),
                "failure_reason": t.get("failure_reason"),
                "turn_band": t.get("turn_band"),
                "s_final": t.get("s_final"),
                "bad_metrics": sorted(m for m, b in bands.items() if b in _BAD),
            }
        )
    newest: dict[str, int] = {}
    for v in verdicts:
        newest[v["assistant_name"]] = max(newest.get(v["assistant_name"], 0), v["version"])
    verdict_docs = []
    for v in verdicts:
        judgments = []
        for j in v.get("judgments", []):
            scores = j.get("scores") or {}
            judgments.append(
                {
                    "judge": j["judge"],
                    "kind": j["kind"],
                    "role": j["role"],
                    "status": j["status"],
                    "failure_reason": j.get("failure_reason"),
                    "resolution_outcome": scores.get("resolution_outcome"),
                    "reasons": {
                        m: scores[m] for m in CASE_METRICS if isinstance(scores.get(m), dict)
                    },
                    "attempts": j["attempts"],
                    "input_tokens": j["input_tokens"],
                    "output_tokens": j["output_tokens"],
                    "cost_usd": j["cost_usd"],
                    "latency_seconds": j["latency_seconds"],
                }
            )
        verdict_docs.append(
            {
                "assistant": v["assistant_name"],
                "version": v["version"],
                "current": v["version"] == newest[v["assistant_name"]],
                "status": v["status"],
                "failure_reason": v.get("failure_reason"),
                "close_reason": v["close_reason"],
                "turns": v["turns"],
                "turns_cut": v["turns_cut"],
                "case_band": v.get("case_band"),
                "case_score": v.get("case_score"),
                "resolution_outcome": v.get("resolution_outcome"),
                "metric_scores": v.get("metric_scores") or {},
                "metric_bands": v.get("metric_bands") or {},
                "turn_mean_s_final": v.get("turn_mean_s_final"),
                "arbitrated": v["arbitrated"],
                "arbitration_trigger": v.get("arbitration_trigger"),
                "judged_at": v["judged_at"],
                "judgments": judgments,
            }
        )
    return {"conversation_id": conversation_id, "turns": turn_docs, "verdicts": verdict_docs}


def _num(value: Any) -> str:
    return "-" if value is None else f"{float(value):.2f}"


def _wrap(text: str, width: int, indent: str) -> list[str]:
    line = " ".join(str(text).split())
    return textwrap.wrap(line, width=width, initial_indent=indent, subsequent_indent=indent) or [
        indent
    ]


def render_case(doc: Mapping[str, Any], *, width: int = 100) -> str:
    """The turns, then each case verdict newest last, with the judges' reasons."""
    out = [f"conversation {doc['conversation_id']}", ""]
    out.append("turns")
    for t in doc["turns"]:
        band = t["turn_band"] or t["status"] or "not judged"
        bad = f"  ({', '.join(t['bad_metrics'])})" if t["bad_metrics"] else ""
        end = "  [ends the case]" if t["ends_case"] else ""
        out.append(
            f"  {t['assistant']} #{t['turn_index']} {t['event_id']}: {band}"
            f" S_final {_num(t['s_final'])}{bad}{end}"
        )
        out.extend(_wrap(f"Q: {t['query']}", width, "      ")[:2])
        out.extend(_wrap(f"A: {t['answer']}", width, "      ")[:3])
    if not doc["verdicts"]:
        out += ["", "no case verdict yet: the case has not closed (cases.idle_seconds)"]
    for v in doc["verdicts"]:
        current = "current" if v["current"] else "superseded"
        out += [
            "",
            f"case verdict {v['assistant']} v{v['version']} "
            f"({current}, closed {v['close_reason']})",
        ]
        if v["status"] != "ok":
            out.append(f"  judge_failed: {v['failure_reason']} (retried at the next run)")
        else:
            out.append(
                f"  case band {v['case_band']}, case score {_num(v['case_score'])}, "
                f"outcome {v['resolution_outcome']}, mean turn S_final "
                f"{_num(v['turn_mean_s_final'])}"
            )
        cut = f", the oldest {v['turns_cut']} cut to fit the judge" if v["turns_cut"] else ""
        out.append(f"  {v['turns']} turns{cut}")
        if v["arbitration_trigger"]:
            asked = "arbiter asked" if v["arbitrated"] else "no arbiter"
            out.append(f"  judges disagreed ({v['arbitration_trigger']}): {asked}")
        for m in CASE_METRICS:
            if m in v["metric_scores"]:
                out.append(
                    f"  {m:<20} {_num(v['metric_scores'][m])} {v['metric_bands'].get(m, '')}"
                )
        for j in v["judgments"]:
            head = f"  judge {j['judge']} ({j['kind']}, {j['role']}): {j['status']}"
            if j["failure_reason"]:
                head += f" {j['failure_reason']}"
            if j["resolution_outcome"]:
                head += f", outcome {j['resolution_outcome']}"
            out.append(head)
            for m, reason in j["reasons"].items():
                text = f"{m} {_num(reason.get('score'))}: {reason.get('justification', '')}"
                out.extend(_wrap(text, width, "      "))
    return "\n".join(out)
