"""Build the rubric example: a rubric set for the 24 synthetic cases, four retrieval variants'
rankings of the knowledge-base chunks, and reference qrels known from how the data was made.

Run from the repository root with the project's interpreter:

    .venv/bin/python examples/rubric/build.py            # rewrites the files in examples/rubric/
    .venv/bin/python examples/rubric/build.py --out DIR  # writes them somewhere else

Deterministic (no clock, no network); tests/test_examples_rubric.py checks the committed files
equal a fresh run. See examples/rubric/README.md.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent
TOP_K = 5
SYSTEMS = ("oracle", "production", "lexical", "random")
_WORD = re.compile(r"\w+")


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def rubric_entry(s: dict[str, Any]) -> dict[str, Any]:
    """Eight questions a good answer to the case covers, each with its gold answer taken from
    the scenario (the knowledge-base article holds every one of them)."""
    product, error = s["product"], s["error"]
    questions = [
        {
            "question": f"What causes {error} on {product} {s['version']}?",
            "gold_answer": s["cause"],
        },
        {
            "question": f"Which version of {product} fixes {error}?",
            "gold_answer": s["fixed_version"],
        },
    ]
    for step in s["steps"]:
        questions.append(
            {
                "question": f"For {error}, which command is used to {_lower_first(step['text'])}?",
                "gold_answer": step["cmd"],
            }
        )
    questions.append(
        {
            "question": f"Which command shows whether the fix for {error} worked?",
            "gold_answer": s["status_cmd"],
        }
    )
    questions.append({"question": f"Which log file records {error}?", "gold_answer": s["log"]})
    return {"id": s["key"], "query": s["subject"], "reviewed": True, "questions": questions}


def _tokens(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def rankings(
    scenarios: list[dict[str, Any]], turns: list[dict[str, Any]]
) -> tuple[dict[str, dict[str, list[str]]], dict[str, str]]:
    """(system -> case key -> chunk ids best first, chunk id -> text)."""
    corpus: dict[str, str] = {}
    first_turn: dict[str, list[str]] = {}
    subjects = {s["subject"]: s["key"] for s in scenarios}
    for t in turns:
        for c in t["contexts"]:
            corpus.setdefault(c["id"], c["text"])
        key = subjects[t["case"]["subject"]]
        if t["turn_index"] == 0 and t["assistant"]["name"].endswith("stable"):
            first_turn[key] = [c["id"] for c in t["contexts"]]
    ids = sorted(corpus)
    out: dict[str, dict[str, list[str]]] = {name: {} for name in SYSTEMS}
    for s in scenarios:
        key, kb = s["key"], s["kb"].lower()
        # The article's resolution chunks first, then its overview: what an ideal retriever returns.
        out["oracle"][key] = [f"{kb}#2", f"{kb}#3", f"{kb}#1"]
        # What the production retriever returned for the case's first turn.
        out["production"][key] = first_turn[key]
        # Word overlap between the case (subject + description) and each chunk.
        query = _tokens(f"{s['subject']} {s['description']}")
        scored = sorted(ids, key=lambda i: (-len(query & _tokens(corpus[i])), i))
        out["lexical"][key] = scored[:TOP_K]
        # Five chunks drawn at random (seeded by the case): a floor for the leaderboard.
        out["random"][key] = random.Random(key).sample(ids, TOP_K)  # noqa: S311
    return out, corpus


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="output directory")
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    scenarios = yaml.safe_load((EXAMPLES / "scenarios.yaml").read_text(encoding="utf-8"))
    with (EXAMPLES / "turns.jsonl").open(encoding="utf-8") as f:
        turns = [json.loads(line) for line in f]

    header = (
        "# Rubric set for the synthetic cases of examples/scenarios.yaml (one entry per case,\n"
        "# id = scenario key, query = case subject). Built by examples/rubric/build.py; every\n"
        "# question's gold answer is the scenario field the knowledge-base article states.\n"
    )
    entries = [rubric_entry(s) for s in scenarios]
    questions = [q["question"] for e in entries for q in e["questions"]]
    if len(set(questions)) != len(questions):  # the stand-in grader keys on the question
        raise SystemExit("two cases share a rubric question")
    body = yaml.safe_dump(entries, sort_keys=False, allow_unicode=True, width=100)
    (out / "rubrics.yaml").write_text(header + body, encoding="utf-8")

    ranked, corpus = rankings(scenarios, turns)
    for system, by_case in ranked.items():
        with (out / f"responses-{system}.jsonl").open("w", encoding="utf-8") as f:
            for key, ids in by_case.items():
                doc = {
                    "system": system,
                    "query": key,
                    "passages": [{"id": i, "text": corpus[i]} for i in ids],
                }
                f.write(json.dumps(doc, ensure_ascii=False) + "\n")

    # Reference qrels from construction: the case's own article chunks are relevant, the
    # resolution chunks (#2, #3) more than the overview (#1); every other pooled chunk is not.
    pooled = {(k, i) for by_case in ranked.values() for k, ids in by_case.items() for i in ids}
    kb_of = {s["key"]: s["kb"].lower() for s in scenarios}
    lines = []
    for key, doc in sorted(pooled):
        own = doc.split("#")[0] == kb_of[key]
        rel = (1 if doc.endswith("#1") else 2) if own else 0
        lines.append(f"{key} 0 {doc} {rel}\n")
    (out / "reference-qrels.txt").write_text("".join(lines), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
