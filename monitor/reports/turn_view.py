"""What ``casewatch inspect`` shows: stable JSON documents and terminal text (pure; no I/O).

The JSON keys are a contract for scripts (sorted, ISO 8601 UTC times, no colour). The text is
for a person paged at night: one block per turn in the listing, fenced sections for one turn,
wrapped to the terminal's width, bands coloured only when the caller says the output is a tty.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import click
from pydantic import ValidationError

from monitor.judging.heuristic.tripwire import identifier_tripwire
from monitor.schema.turn import METRICS, Band, TurnEvent
from monitor.scoring.turn import band, lower_edge
from monitor.storage.turn_queries import TurnDetail, TurnSummary

_BAND_COLOURS = {"severe": "red", "moderate": "yellow", "minor": "cyan", "none": "green"}


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="seconds").replace("+00:00", "Z")


def first_line(text: str, limit: int = 160) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


# ---------------------------------------------------------------- JSON


def summary_doc(s: TurnSummary) -> dict[str, Any]:
    return {
        "time": _iso(s.event_timestamp),
        "event_id": s.event_id,
        "assistant": s.assistant,
        "status": s.status,
        "turn_band": s.turn_band,
        "s_final": s.s_final,
        "failure_reason": s.failure_reason,
        "worst": [
            {
                "metric": m.metric,
                "band": m.band,
                "score": m.score,
                "justification": first_line(m.justification),
            }
            for m in s.worst
        ],
    }


def _disagreements(judged: list[dict[str, Any]]) -> list[dict[str, Any]]:
    primaries = [j for j in judged if j["role"] == "primary" and j["scores"]]
    if len(primaries) < 2:
        return []
    found = []
    for m in METRICS:
        bands = {
            j["judge"]: band(float(j["scores"][m]["score"])).value
            for j in primaries
            if m in j["scores"]
        }
        if len(set(bands.values())) > 1:
            found.append({"metric": m, "bands": bands})
    return found


def _tripwire(event: dict[str, Any]) -> list[str]:
    # Not stored: recomputed from the stored event (the tripwire is pure and deterministic).
    try:
        turn = TurnEvent.model_validate(event)
    except ValidationError:
        return []
    return [miss.describe() for miss in identifier_tripwire(turn).misses]


def detail_doc(d: TurnDetail) -> dict[str, Any]:
    ev = d.event
    verdict = dict(d.verdict) if d.verdict is not None else None
    if verdict is not None:
        verdict["stored_at"] = _iso(verdict["stored_at"])
    arbiters = [j for j in d.judgments if j["role"] == "arbiter"]
    return {
        "event_id": d.event_id,
        "assistant": d.assistant,
        "assistant_version": ev.get("assistant", {}).get("version"),
        "conversation_id": ev.get("conversation_id"),
        "turn_index": ev.get("turn_index"),
        "trace_id": d.trace_id,
        "span_id": d.span_id,
        "time": _iso(d.event_timestamp),
        "stored_at": _iso(d.stored_at),
        "case": ev.get("case", {}),
        "history": ev.get("history", []),
        "query": ev.get("query", ""),
        "contexts": ev.get("contexts", []),
        "answer": ev.get("answer", ""),
        "reference": ev.get("reference"),
        "labels": ev.get("labels", {}),
        "feedback": ev.get("feedback"),
        "verdict": verdict,
        "judgments": d.judgments,
        "arbitration": {
            "arbitrated": bool(verdict and verdict["arbitrated"]),
            "trigger": verdict["arbitration_trigger"] if verdict else None,
            "disagreements": _disagreements(d.judgments),
            "arbiters": [j["judge"] for j in arbiters],
        },
        "tripwire": _tripwire(ev),
        "cost_usd": sum(float(j["cost_usd"]) for j in d.judgments),
        "latency_seconds": sum(float(j["latency_seconds"]) for j in d.judgments),
        "older_verdicts": d.older_verdicts,
    }


# ---------------------------------------------------------------- text

# What the verdict line's words mean (monitor/scoring/turn.py), said under it.
BAND_LEGEND = (
    "(S_final: the weighted mean of the metric scores, 0 worst to 1 best, banded "
    f"none >= {lower_edge(Band.NONE):.2f}, minor >= {lower_edge(Band.MINOR):.2f}, "
    f"moderate >= {lower_edge(Band.MODERATE):.2f}, else severe; in brackets its own band. "
    "The turn band is the worse of that band and the worst band among critical_metrics.)"
)
# A turn assembled from spans carries a case only when the spans name one.
EMPTY_CASE_HINT = (
    "(empty: no span attribute gave a case; set assembly.case_attributes to the attributes "
    "holding it, e.g. {subject: [support.case.subject]}, docs/otel.md)"
)


class _Text:
    def __init__(self, width: int, color: bool) -> None:
        self.width = max(40, width)
        self.color = color
        self.lines: list[str] = []

    def band(self, name: str | None) -> str:
        text = name or "—"
        if self.color and name in _BAND_COLOURS:
            return click.style(text, fg=_BAND_COLOURS[name], bold=name == "severe")
        return text

    def fence(self, title: str) -> None:
        head = f"── {title} "
        self.lines.append(head + "─" * max(3, self.width - len(head)))

    def para(self, text: str, indent: str = "  ") -> None:
        for raw in (text or "").splitlines() or [""]:
            self.lines.extend(
                textwrap.wrap(
                    raw,
                    self.width,
                    initial_indent=indent,
                    subsequent_indent=indent,
                    break_long_words=True,
                    replace_whitespace=False,
                )
                or [indent.rstrip()]
            )

    def text(self) -> str:
        return "\n".join(self.lines)


def render_summaries(rows: Iterable[TurnSummary], *, width: int, color: bool) -> str:
    out = _Text(width, color)
    for s in rows:
        score = f"S_final {s.s_final:.2f}" if s.s_final is not None else s.status
        out.lines.append(
            f"{_iso(s.event_timestamp)}  {s.event_id}  {s.assistant}  "
            f"{out.band(s.turn_band) if s.status == 'ok' else s.status}  {score}"
        )
        if s.status != "ok":
            out.para(f"judge failed: {s.failure_reason or 'unknown reason'}", "    ")
        for m in s.worst:
            start = len(out.lines)
            out.para(f"{m.metric} {m.band} {m.score:.2f}: {first_line(m.justification)}", "    ")
            # Colour after wrapping, so escape codes never count towards the width.
            out.lines[start] = out.lines[start].replace(f" {m.band} ", f" {out.band(m.band)} ", 1)
        out.lines.append("")
    return out.text().rstrip("\n")


def render_detail(doc: dict[str, Any], *, width: int, color: bool) -> str:
    out = _Text(width, color)
    v = doc["verdict"]
    out.lines.append(
        f"turn {doc['event_id']}  {doc['assistant']} {doc['assistant_version'] or ''}  "
        f"conversation {doc['conversation_id']} #{doc['turn_index']}  at {doc['time']}"
    )
    if doc.get("trace_id"):
        out.lines.append(f"trace {doc['trace_id']}  span {doc['span_id']}")
    if v is None:
        out.lines.append("no verdict stored for this turn (not sampled, or still in flight)")
    elif v["status"] != "ok":
        out.lines.append(f"judge_failed: {v['failure_reason']}")
    else:
        out.lines.append(
            f"turn band {out.band(v['turn_band'])}  S_final {v['s_final']:.3f} "
            f"({out.band(v['final_band'])}, weights {v['weight_profile']})"
        )
        out.para(BAND_LEGEND, "  ")
    case = doc["case"]
    out.fence("case")
    if not any(case.get(k) for k in ("subject", "description", "product", "environment")):
        # Turns assembled from spans have ids "otel-<trace>-<span>" (consumers/otel/genai.py).
        from_spans = str(doc["event_id"]).startswith("otel-")
        out.para(EMPTY_CASE_HINT if from_spans else "(no case given with this turn)")
    else:
        out.para(f"{case.get('subject', '')}")
        out.para(case.get("description", ""))
    extras = {k: case[k] for k in ("product", "environment") if case.get(k)}
    if extras:
        out.para(", ".join(f"{k}: {val}" for k, val in extras.items()))
    if doc["history"]:
        out.fence("history")
        for msg in doc["history"]:
            out.para(f"{msg.get('role', '?')}: {msg.get('content', '')}")
    out.fence("query")
    out.para(doc["query"])
    out.fence(f"contexts ({len(doc['contexts'])})")
    for c in doc["contexts"]:
        score = c.get("score")
        head = f"[{c.get('id', '?')}]" + (f" score {score:.3f}" if score is not None else "")
        out.para(head + (f"  {c['source']}" if c.get("source") else ""))
        out.para(c.get("text", ""), "      ")
    out.fence("answer")
    out.para(doc["answer"])
    if doc["reference"]:
        out.fence("reference")
        out.para(doc["reference"])
    if v is not None and v["status"] == "ok":
        out.fence("final scores")
        for m in METRICS:
            if m in v["metric_scores"]:
                out.lines.append(
                    f"  {m:<26} {v['metric_scores'][m]:.2f}  {out.band(v['metric_bands'][m])}"
                )
    for j in doc["judgments"]:
        out.fence(f"judge {j['judge']} ({j['role']}, {j['kind']}:{j['model']})")
        out.para(
            f"status {j['status']}, attempts {j['attempts']}, tokens "
            f"{j['input_tokens']}+{j['output_tokens']}, cost ${j['cost_usd']:.4f}, "
            f"latency {j['latency_seconds']:.2f}s, prompt {j['prompt_version']}"
        )
        if j["status"] != "ok":
            out.para(f"failed: {j['failure_reason']}: {j['failure_detail'] or ''}")
        for m in METRICS:
            entry = (j["scores"] or {}).get(m)
            if entry:
                b = band(float(entry["score"])).value
                out.para(f"{m} {entry['score']:.2f} {b}: {entry['justification']}", "  ")
    if doc.get("outcomes") is not None:
        _render_outcomes(out, doc["outcomes"], v)
    arb = doc["arbitration"]
    out.fence("arbitration")
    if not arb["arbitrated"]:
        out.para("not arbitrated (the primary judges agreed, or a single judge scored)")
    else:
        out.para(f"arbitrated on {arb['trigger']} by {', '.join(arb['arbiters']) or '?'}")
        for dis in arb["disagreements"]:
            bands = ", ".join(f"{k} {val}" for k, val in dis["bands"].items())
            out.para(f"{dis['metric']}: {bands}")
    out.fence("tripwire")
    out.para("; ".join(doc["tripwire"]) if doc["tripwire"] else "no identifier near-miss")
    out.fence("cost")
    out.para(
        f"${doc['cost_usd']:.4f} over {len(doc['judgments'])} judgment(s), "
        f"{doc['latency_seconds']:.2f}s of judge time"
        + (
            f"; {doc['older_verdicts']} older verdict(s) under earlier judge configurations"
            if doc["older_verdicts"]
            else ""
        )
    )
    return out.text()


def outcome_docs(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The stored outcome events of a turn and its case, as ``inspect turn`` shows them."""
    keep = ("outcome_id", "kind", "polarity", "thumbs", "rating", "scale_min", "scale_max",
            "comment", "agreement")  # fmt: skip
    docs = []
    for row in rows:
        doc = {k: row.get(k) for k in keep}
        doc["time"] = _iso(row["event_timestamp"])
        doc["joined"] = row.get("joined_at") is not None
        docs.append(doc)
    return docs


def _render_outcomes(out: _Text, outcomes: list[dict[str, Any]], verdict: Any) -> None:
    out.fence(f"what the customer said ({len(outcomes)})")
    if not outcomes:
        out.para("no feedback or case outcome stored for this turn or its case")
        return
    for o in outcomes:
        said = o["kind"]
        if o["thumbs"]:
            said += f" thumbs {o['thumbs']}"
        if o["rating"] is not None:
            said += f" rating {o['rating']:g} on {o['scale_min']:g}..{o['scale_max']:g}"
        if o["polarity"]:
            said += f" ({o['polarity']})"
        if o["agreement"]:
            said += f"; against the judge: {o['agreement']}"
        out.para(f"{o['time']}  {said}")
        if o["comment"]:
            out.para(o["comment"], "      ")


def inspect_hint(
    db_path: str, assistant: str | None, event_id: str | None = None, program: str = "casewatch"
) -> str:
    """What to run after the demo (or any SQLite store) to see the turns behind an alert:
    ``program`` as the user can run it (the venv's path unless ``casewatch`` on PATH is the
    same program) and ``event_id``, a real turn to open (a placeholder when there is none)."""
    who = f" --assistant {assistant}" if assistant else ""
    turn = event_id if event_id is not None else "EVENT_ID"
    return (
        f"the verdicts are kept in {db_path}; the turns behind the alerts:\n"
        f"  {program} inspect turns --db {db_path}{who} --band severe\n"
        f"  {program} inspect turn {turn} --db {db_path}   # the turn, every judge's reasons\n"
        "  (SQL: the turn_verdicts view, rules/RUNBOOK.md 'Reading the turns behind an alert')"
    )
