"""Case labelling files (pure; no I/O): what a labeller gets for a whole case (our JSONL and a
Label Studio import with its labelling interface). Read back by ``label_files.parse_labels``
with the case keys (``CASE_LABEL_KEYS``) and ``conversation_id`` as the id.

A labeller sees the case (subject, description) and every turn the case verdict covered, each
with its retrieved evidence, and gives a band per case metric and one for the whole case
(``case_band``); never the judge's bands (see ``label_files``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import escape

from monitor.reports.label_files import BANDS
from monitor.schema.case import CASE_METRICS
from monitor.schema.turn import TurnEvent

CASE_BAND = "case_band"
CASE_LABEL_KEYS: tuple[str, ...] = (*CASE_METRICS, CASE_BAND)
CASE_ID = "conversation_id"


def _case_fields(events: Sequence[TurnEvent]) -> dict[str, Any]:
    first = events[0] if events else None
    return {
        "case_subject": first.case.subject if first is not None else "",
        "case_description": first.case.description if first is not None else "",
        "turns": [
            {
                "turn_index": e.turn_index,
                "query": e.query,
                "contexts": [{"id": c.id, "text": c.text, "source": c.source} for c in e.contexts],
                "answer": e.answer,
            }
            for e in events
        ],
    }


def case_jsonl_record(
    batch_id: str, conversation_id: str, version: int, events: Sequence[TurnEvent]
) -> dict[str, Any]:
    """One line of the JSONL a labeller fills in: ``labels`` {case metric or case_band: band}."""
    return {
        "batch_id": batch_id,
        CASE_ID: conversation_id,
        "version": version,
        **_case_fields(events),
        "labeller": None,
        "labels": {},
    }


def transcript(events: Sequence[TurnEvent]) -> str:
    """The case as one text: each turn's customer message, evidence ids and answer."""
    parts = []
    for e in events:
        evidence = ", ".join(c.id for c in e.contexts) or "none"
        parts.append(
            f"[turn {e.turn_index}] customer: {e.query}\n"
            f"  evidence: {evidence}\n  assistant: {e.answer}"
        )
    return "\n\n".join(parts)


def case_label_studio_task(
    batch_id: str, conversation_id: str, version: int, events: Sequence[TurnEvent]
) -> dict[str, Any]:
    fields = _case_fields(events)
    return {
        "data": {
            "batch_id": batch_id,
            CASE_ID: conversation_id,
            "version": version,
            "case": f"{fields['case_subject']}\n{fields['case_description']}",
            "conversation": transcript(events),
        }
    }


def case_label_studio_config() -> str:
    """The labelling interface (Label Studio's XML): the case, and one band choice per key."""
    shown = "".join(
        f'  <Header value="{name}"/>\n  <Text name="{name}" value="${name}"/>\n'
        for name in ("case", "conversation")
    )
    choices = "".join(
        f'  <Header value="{escape(key)}"/>\n'
        f'  <Choices name="{escape(key)}" toName="conversation" choice="single" '
        'showInLine="true">\n'
        + "".join(f'    <Choice value="{b}"/>\n' for b in BANDS)
        + "  </Choices>\n"
        for key in CASE_LABEL_KEYS
    )
    return f"<View>\n{shown}{choices}</View>\n"
