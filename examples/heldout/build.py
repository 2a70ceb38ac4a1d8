"""Build the held-out evaluation set's JSONL files from the hand-written YAML cases.

Run from the repository root with the project's interpreter:

    .venv/bin/python examples/heldout/build.py            # rewrites the JSONL files here
    .venv/bin/python examples/heldout/build.py --out DIR  # writes them somewhere else

cases-dev.yaml and cases-test.yaml are the source (turns and labels written by hand, see
../README.md); this only turns each case into a schema-v1 turn event and its labels into
``{"event_id", "labels": {metric: band}}`` rows. Deterministic: no clock, no network; the
committed JSONL must equal a fresh run (tests/test_examples.py checks that).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from monitor.schema.turn import METRICS, Band, TurnEvent

HERE = Path(__file__).resolve().parent
SPLITS = ("dev", "test")
START = datetime(2026, 11, 16, 8, 0, tzinfo=UTC)
# Two assistants of another team, alternating, so that no single voice is the held-out set.
ASSISTANTS = (
    {"name": "northwind-helpdesk", "version": "5.1", "model": "qwen2.5-72b-instruct"},
    {"name": "harbor-assist", "version": "0.9", "model": "gpt-4.1-mini"},
)
SHORT = {
    "hal": "hallucination",
    "ret": "retrieval_correctness",
    "suf": "context_sufficiency",
    "help": "answer_helpfulness",
    "fit": "answer_type_fit",
    "ids": "identifier_integrity",
    "case": "case_issue_identification",
    "res": "resolution_alignment",
}
FILES = [f"{split}.jsonl" for split in SPLITS] + [f"{split}-labels.jsonl" for split in SPLITS]


def load(split: str) -> list[dict[str, Any]]:
    with (HERE / f"cases-{split}.yaml").open(encoding="utf-8") as f:
        cases = yaml.safe_load(f)
    if not isinstance(cases, list):
        raise SystemExit(f"cases-{split}.yaml: expected a list of cases")
    return cases


def turn_event(case: dict[str, Any], n: int) -> dict[str, Any]:
    history = [{"role": role, "content": text} for role, text in case.get("history", [])]
    event = {
        "event_id": case["id"],
        "conversation_id": f"ho-{case['id']}",
        "turn_index": sum(1 for m in history if m["role"] == "user"),
        "timestamp": (START + timedelta(minutes=7 * n)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "assistant": ASSISTANTS[n % len(ASSISTANTS)],
        "case": {
            "subject": case["subject"],
            "description": case["description"],
            "product": case["product"],
            "environment": case["environment"],
        },
        "history": history,
        "query": case["query"],
        "contexts": [{"id": c["id"], "text": c["text"]} for c in case["contexts"]],
        "answer": case["answer"],
        "labels": {"set": "heldout"},
    }
    TurnEvent.model_validate(event)  # fail here, not in a bench
    return event


def labels(case: dict[str, Any]) -> dict[str, Any]:
    bands = case["bands"]
    if set(bands) != set(SHORT):
        raise SystemExit(f"{case['id']}: bands must name exactly {sorted(SHORT)}")
    full = {SHORT[k]: Band(bands[k]).value for k in SHORT}
    return {"event_id": case["id"], "labels": {m: full[m] for m in METRICS}}


def dump(rows: list[dict[str, Any]], path: Path) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    n = 0
    for split in SPLITS:
        cases = load(split)
        events = []
        for case in cases:
            events.append(turn_event(case, n))
            n += 1
        dump(events, args.out / f"{split}.jsonl")
        dump([labels(c) for c in cases], args.out / f"{split}-labels.jsonl")
        print(f"{split}: {len(cases)} turns", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
