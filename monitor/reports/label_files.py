"""Labelling files (pure; no I/O): drawing a batch, the files a labeller gets (our JSONL and a
Label Studio import with its labelling interface), and reading labels back from our JSONL or a
Label Studio JSON export, every bad row reported with where it is and why.

Labellers see the turn (case, history, query, contexts, answer), never the judge's bands: a
label anchored on the judge would make the agreement and the corrected rate look better than
they are.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from xml.sax.saxutils import escape

from monitor.schema.turn import METRICS, Band

TURN_BAND = "turn_band"
LABEL_KEYS: tuple[str, ...] = (*METRICS, TURN_BAND)
BANDS: tuple[str, ...] = tuple(b.value for b in Band)


def draw(population: int, n: int, seed: int) -> list[int]:
    """A uniform random sample without replacement of ``min(n, population)`` positions of a
    frame ordered by event id: the same frame and seed always draw the same turns."""
    return random.Random(seed).sample(range(population), min(n, population))  # noqa: S311


def _turn_fields(event: Mapping[str, Any]) -> dict[str, Any]:
    case = event.get("case", {})
    return {
        "case_subject": case.get("subject", ""),
        "case_description": case.get("description", ""),
        "history": event.get("history", []),
        "query": event.get("query", ""),
        "contexts": [
            {"id": c.get("id"), "text": c.get("text", ""), "source": c.get("source")}
            for c in event.get("contexts", [])
        ],
        "answer": event.get("answer", ""),
    }


def jsonl_record(
    batch_id: str, event_id: str, event: Mapping[str, Any], inclusion: float | None = None
) -> dict[str, Any]:
    """One line of the JSONL a labeller fills in: ``labels`` {metric or turn_band: band}.
    ``inclusion``: the turn's probability of being drawn (a batch drawn by uncertainty)."""
    return {
        "batch_id": batch_id,
        "event_id": event_id,
        **({} if inclusion is None else {"inclusion_probability": inclusion}),
        **_turn_fields(event),
        "labeller": None,
        "labels": {},
    }


def label_studio_task(
    batch_id: str, event_id: str, event: Mapping[str, Any], inclusion: float | None = None
) -> dict[str, Any]:
    fields = _turn_fields(event)
    history = "\n".join(f"{m.get('role')}: {m.get('content')}" for m in fields["history"])
    contexts = "\n\n".join(f"[{c['id']}] {c['text']}" for c in fields["contexts"])
    return {
        "data": {
            "batch_id": batch_id,
            "event_id": event_id,
            "case": f"{fields['case_subject']}\n{fields['case_description']}",
            "history": history,
            "query": fields["query"],
            "contexts": contexts,
            "answer": fields["answer"],
            **({} if inclusion is None else {"inclusion_probability": inclusion}),
        }
    }


def label_studio_config() -> str:
    """The labelling interface (Label Studio's XML): the turn, and one band choice per key."""
    shown = "".join(
        f'  <Header value="{name}"/>\n  <Text name="{name}" value="${name}"/>\n'
        for name in ("case", "history", "query", "contexts", "answer")
    )
    choices = "".join(
        f'  <Header value="{escape(key)}"/>\n'
        f'  <Choices name="{escape(key)}" toName="answer" choice="single" showInLine="true">\n'
        + "".join(f'    <Choice value="{b}"/>\n' for b in BANDS)
        + "  </Choices>\n"
        for key in LABEL_KEYS
    )
    return f"<View>\n{shown}{choices}</View>\n"


# ---------------------------------------------------------------- reading labels back


@dataclass(frozen=True)
class BadRow:
    where: str  # "line 3" or "task 2 (id 17)"
    reason: str

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"


@dataclass
class ParsedLabels:
    rows: list[dict[str, Any]] = field(default_factory=list)
    bad: list[BadRow] = field(default_factory=list)
    # Rows of a known turn with no band given yet (a batch labelled in part): left out, counted.
    unlabelled: list[str] = field(default_factory=list)


def _time(value: Any, default: datetime) -> datetime:
    if value is None:
        return default
    at = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def _check(
    out: ParsedLabels,
    where: str,
    batch_id: Any,
    event_id: Any,
    labeller: Any,
    labelled: Mapping[str, Any],
    at: datetime,
    batches: Mapping[str, set[str]],
    keys: tuple[str, ...] = LABEL_KEYS,
    id_field: str = "event_id",
) -> None:
    """``keys``: the label keys of the unit labelled; ``id_field``: its id (a case batch:
    the case metrics with ``case_band``, ``conversation_id``)."""
    reasons = []
    given = {k: v for k, v in labelled.items() if v is not None}
    if not isinstance(batch_id, str) or batch_id not in batches:
        reasons.append(f"unknown batch {batch_id!r}")
    elif not isinstance(event_id, str) or event_id not in batches[batch_id]:
        noun = "event" if id_field == "event_id" else id_field.removesuffix("_id")
        reasons.append(f"{noun} {event_id!r} is not in batch {batch_id!r}")
    if given and (not isinstance(labeller, str) or not labeller.strip()):
        reasons.append("no labeller (set 'labeller' or pass --labeller)")
    for key, value in labelled.items():
        if key not in keys:
            reasons.append(f"unknown metric {key!r}")
        elif value is not None and value not in BANDS:
            reasons.append(f"{key}: band {value!r} is not one of {', '.join(BANDS)}")
    if not given and not reasons:
        out.unlabelled.append(where)  # not labelled yet: the rest of the batch still imports
        return
    if reasons:
        out.bad.append(BadRow(where, "; ".join(reasons)))
        return
    for key, value in given.items():
        out.rows.append(
            {
                "batch_id": batch_id,
                id_field: event_id,
                "metric": key,
                "band": value,
                "labeller": str(labeller).strip(),
                "labelled_at": at,
            }
        )


def parse_jsonl(
    text: str,
    batches: Mapping[str, set[str]],
    labeller: str | None,
    now: datetime,
    *,
    keys: tuple[str, ...] = LABEL_KEYS,
    id_field: str = "event_id",
) -> ParsedLabels:
    out = ParsedLabels()
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"line {number}"
        try:
            doc = json.loads(raw)
            if not isinstance(doc, dict) or not isinstance(doc.get("labels"), dict):
                raise ValueError("expected an object with 'labels': {metric: band}")
            at = _time(doc.get("labelled_at"), now)
        except ValueError as exc:
            out.bad.append(BadRow(where, str(exc)))
            continue
        _check(out, where, doc.get("batch_id"), doc.get(id_field),
               doc.get("labeller") or labeller, doc["labels"], at, batches, keys,
               id_field)  # fmt: skip
    return out


def _completed_by(annotation: Mapping[str, Any]) -> str | None:
    who = annotation.get("completed_by")
    if isinstance(who, dict):
        who = who.get("email") or who.get("id")
    return None if who is None else str(who)


def parse_label_studio(
    text: str,
    batches: Mapping[str, set[str]],
    labeller: str | None,
    now: datetime,
    *,
    keys: tuple[str, ...] = LABEL_KEYS,
    id_field: str = "event_id",
) -> ParsedLabels:
    """A Label Studio JSON export: tasks with ``data`` (ours) and ``annotations`` whose
    ``result`` holds one ``choices`` entry per labelled key. One label set per annotation."""
    out = ParsedLabels()
    try:
        tasks = json.loads(text)
    except ValueError as exc:
        out.bad.append(BadRow("file", f"not JSON: {exc}"))
        return out
    if not isinstance(tasks, list):
        out.bad.append(BadRow("file", "expected a JSON array of tasks (Label Studio JSON export)"))
        return out
    for number, task in enumerate(tasks, start=1):
        where = f"task {number}" + (f" (id {task.get('id')})" if isinstance(task, dict) else "")
        if not isinstance(task, dict) or not isinstance(task.get("data"), dict):
            out.bad.append(BadRow(where, "expected an object with 'data'"))
            continue
        data = task["data"]
        annotations = [
            a
            for a in task.get("annotations") or []
            if isinstance(a, dict) and not a.get("was_cancelled")
        ]
        if not annotations:
            _check(out, where, data.get("batch_id"), data.get(id_field), labeller, {}, now,
                   batches, keys, id_field)  # fmt: skip
        for annotation in task.get("annotations") or []:
            if not isinstance(annotation, dict) or annotation.get("was_cancelled"):
                continue
            labelled: dict[str, Any] = {}
            try:
                for result in annotation.get("result") or []:
                    choices = result["value"]["choices"]
                    if len(choices) != 1:
                        raise ValueError(f"{result['from_name']}: pick exactly one band")
                    labelled[str(result["from_name"])] = choices[0]
                at = _time(annotation.get("created_at"), now)
            except (KeyError, TypeError, ValueError) as exc:
                out.bad.append(BadRow(where, f"unreadable annotation: {exc}"))
                continue
            _check(out, where, data.get("batch_id"), data.get(id_field),
                   _completed_by(annotation) or labeller, labelled, at, batches, keys,
                   id_field)  # fmt: skip
    return out


def parse_labels(
    text: str,
    batches: Mapping[str, set[str]],
    labeller: str | None,
    now: datetime,
    *,
    keys: tuple[str, ...] = LABEL_KEYS,
    id_field: str = "event_id",
) -> ParsedLabels:
    """Our JSONL, or a Label Studio JSON export (a file starting with ``[``)."""
    if text.lstrip().startswith("["):
        return parse_label_studio(text, batches, labeller, now, keys=keys, id_field=id_field)
    return parse_jsonl(text, batches, labeller, now, keys=keys, id_field=id_field)


def check_inclusion(text: str, probabilities: Mapping[tuple[str, str], float]) -> list[BadRow]:
    """Rows of batches drawn with unequal probabilities must carry the probability of their
    draw (``inclusion_probability``, as exported): labels without it could be weighted wrongly
    and an unweighted estimate would be biased towards the unsure turns. ``probabilities``:
    (batch, event) -> the probability recorded when drawn, for those batches only."""
    if not probabilities:
        return []
    rows: list[tuple[str, Any]] = []
    if text.lstrip().startswith("["):
        try:
            tasks = json.loads(text)
        except ValueError:
            return []  # reported by parse_labels
        for number, task in enumerate(tasks if isinstance(tasks, list) else [], start=1):
            if isinstance(task, dict) and isinstance(task.get("data"), dict):
                rows.append((f"task {number}", task["data"]))
    else:
        for number, raw in enumerate(text.splitlines(), start=1):
            try:
                doc = json.loads(raw) if raw.strip() else None
            except ValueError:
                continue  # reported by parse_labels
            if isinstance(doc, dict):
                rows.append((f"line {number}", doc))
    bad = []
    for where, doc in rows:
        key = (str(doc.get("batch_id")), str(doc.get("event_id")))
        if key not in probabilities:
            continue
        given = doc.get("inclusion_probability")
        if not isinstance(given, int | float) or isinstance(given, bool):
            bad.append(BadRow(where, "no inclusion_probability: this batch was drawn with "
                              "unequal probabilities and each label is weighted by the "
                              "inverse of its own; keep the field as exported"))  # fmt: skip
        elif abs(float(given) - probabilities[key]) > 1e-9 * max(1.0, probabilities[key]):
            drawn_with = probabilities[key]
            bad.append(BadRow(where, f"inclusion_probability {given} is not the {drawn_with} "
                              "this turn was drawn with"))  # fmt: skip
    return bad


def consensus(
    rows: Iterable[Mapping[str, Any]], id_field: str = "event_id"
) -> dict[str, dict[str, Band]]:
    """event (or case: ``id_field``) -> {key: band}: the band most labellers gave; a tie goes to
    the worse band (the cautious reading of a turn people disagree on)."""
    votes: dict[tuple[str, str], Counter[str]] = {}
    for r in rows:
        votes.setdefault((str(r[id_field]), str(r["metric"])), Counter())[str(r["band"])] += 1
    out: dict[str, dict[str, Band]] = {}
    for (event_id, key), counter in votes.items():
        best = min(counter, key=lambda b: (-counter[b], Band(b).rank))
        out.setdefault(event_id, {})[key] = Band(best)
    return out
