"""The regression ``casewatch demo`` injects into a canary, as pure functions of the examples.

The examples hold two versions of one assistant on the same conversations, ``<track>-stable``
and ``<track>-canary``, and ``flaws.jsonl`` says which answers were made flawed on purpose. The
demo replays them in two phases:

- healthy: the canary's flawed answers are swapped for the stable version's answer to the
  same turn (same conversation and turn index; the canary's name, version and event id kept),
  so the canary starts as good as the stable one;
- regressed (from the injection on): every canary slot answers with one of the canary's flawed
  answers (corrupted identifiers, hallucinated or repeated steps, off-topic answers,
  inappropriate "not enough information"): its own when its turn has one, else the others
  cycled, each with an event id of its own. Only the answer changes: the slot keeps its own
  case, query, history and contexts. (Replaying the flawed turns whole, as the demo did, moved
  the canary's inputs to those 29 turns' mix of products, environments and retrieval scores,
  and the drift job rightly flagged input drift where only the answers had changed.)

The stable assistant is the same in both phases: a healthy sibling that must fire nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CANARY_SUFFIX = "-canary"
STABLE_SUFFIX = "-stable"
# Flaws that make an answer worse (flaws.jsonl); "insufficient_appropriate" is the right call
# on thin retrieval, so it does not count as one.
REGRESSION_FLAWS = frozenset(
    {
        "corrupted_identifier",
        "hallucinated_step",
        "repeated_step",
        "insufficient_inappropriate",
        "off_topic",
    }
)
FLAWS_FILE = "flaws.jsonl"


@dataclass(frozen=True)
class RegressionPlan:
    canary: str
    stable: str
    healthy: list[dict[str, Any]]
    regressed: list[dict[str, Any]]
    swapped: int  # canary answers replaced by the stable one's in the healthy phase
    flawed: int  # distinct flawed canary answers the regressed phase cycles through


def _name(doc: Mapping[str, Any]) -> str:
    assistant = doc.get("assistant")
    return str(assistant.get("name", "")) if isinstance(assistant, Mapping) else ""


def _turn_key(doc: Mapping[str, Any]) -> tuple[str, str]:
    return str(doc.get("conversation_id")), str(doc.get("turn_index"))


def load_flaws(path: Path) -> dict[str, str]:
    """event_id -> flaw from a flaws.jsonl file; {} when it is missing or unreadable (the
    demo then runs without a regression and says so)."""
    flaws: dict[str, str] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return flaws
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and "event_id" in row:
            flaws[str(row["event_id"])] = str(row.get("flaw", "none"))
    return flaws


def plan_regression(
    docs: Sequence[Mapping[str, Any]], flaws: Mapping[str, str]
) -> RegressionPlan | None:
    """The two phases for the first ``<track>-canary`` with a ``<track>-stable`` sibling and
    flawed answers; None when the docs have no such pair (then there is nothing to inject)."""
    names = {_name(d) for d in docs}
    for canary in sorted(n for n in names if n.endswith(CANARY_SUFFIX)):
        stable = canary.removesuffix(CANARY_SUFFIX) + STABLE_SUFFIX
        if stable not in names:
            continue
        bad = [
            d
            for d in docs
            if _name(d) == canary and flaws.get(str(d.get("event_id"))) in REGRESSION_FLAWS
        ]
        if not bad:
            continue
        stable_turns = {_turn_key(d): d for d in docs if _name(d) == stable}
        healthy: list[dict[str, Any]] = []
        regressed: list[dict[str, Any]] = []
        swapped = n_canary = 0
        for doc in docs:
            if _name(doc) != canary:
                healthy.append(dict(doc))
                regressed.append(dict(doc))
                continue
            sibling = stable_turns.get(_turn_key(doc))
            if flaws.get(str(doc.get("event_id"))) in REGRESSION_FLAWS and sibling is not None:
                healthy.append(
                    {**sibling, "event_id": doc["event_id"], "assistant": doc["assistant"]}
                )
                swapped += 1
            else:
                healthy.append(dict(doc))
            own = flaws.get(str(doc.get("event_id"))) in REGRESSION_FLAWS
            flawed = doc if own else bad[n_canary % len(bad)]
            regressed.append(
                {**doc, "answer": flawed["answer"], "event_id": f"{doc['event_id']}~r{n_canary}"}
            )
            n_canary += 1
        return RegressionPlan(canary, stable, healthy, regressed, swapped, len(bad))
    return None
