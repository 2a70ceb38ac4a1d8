"""Build the baseline-tier probe set (examples/probes.jsonl) from the synthetic dataset.

Run from the repository root with the project's interpreter:

    .venv/bin/python examples/probes.py            # rewrites examples/probes.jsonl
    .venv/bin/python examples/probes.py --out FILE

One probe per conversation: its first turn whose retrieval was complete (the question the
stable assistant was asked, with the same case, history and contexts). The three baseline
answers follow DICE's hierarchy:

- high:   fully correct: the reference answer of the turn (the stable voice, every step);
- medium: partially correct: the same answer cut after its first step (or first sentence);
- low:    incorrect: a near-missed identifier (error code, flag, version or log path), or an
          invented step when the answer has no identifier to corrupt.

The reference is the fully correct answer in the other (chatty) voice, so the High tier is
not a verbatim copy of it. Deterministic (no clock, no randomness beyond a fixed seed);
tests/monitor/judging/test_probes.py checks the committed file equals a fresh run.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from casebook import (  # noqa: E402
    clean_answer,
    corrupted_answer,
    eligible,
    hallucinated_answer,
    load_scenarios,
)

SEED = 20261123
VARIANTS = ("error", "flag", "version", "path")
_STEP = re.compile(r"^(?:\d+\.|-) ")


def medium(answer: str) -> str:
    """Partially correct: everything up to and including the first step; without steps,
    the first sentence."""
    lines = answer.split("\n")
    steps = [i for i, line in enumerate(lines) if _STEP.match(line)]
    if len(steps) >= 2:
        return "\n".join(lines[: steps[0] + 1])
    first = re.split(r"(?<=[.!?])\s+", answer.strip(), maxsplit=1)[0]
    return first


def low(sc: Any, answer: str, rng: random.Random) -> str:
    for variant in VARIANTS:
        if eligible(sc, answer, variant):
            text, _ = corrupted_answer(sc, answer, variant)
            if text != answer:
                return text
    text, _ = hallucinated_answer(sc, answer, "full", rng)
    return text


def build() -> list[dict[str, Any]]:
    rng = random.Random(SEED)  # noqa: S311 -- reproducible synthetic data
    scenarios = {sc["key"]: sc for sc in load_scenarios(HERE / "scenarios.yaml")}
    flaws = {}
    with (HERE / "flaws.jsonl").open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            flaws[row["event_id"]] = row
    chosen: dict[str, dict[str, Any]] = {}
    with (HERE / "turns-stable.jsonl").open(encoding="utf-8") as f:
        for line in f:
            turn = json.loads(line)
            flaw = flaws[turn["event_id"]]
            if flaw["retrieval"] != "full" or turn["conversation_id"] in chosen:
                continue
            chosen[turn["conversation_id"]] = turn
    probes = []
    for _conversation, turn in sorted(chosen.items()):
        flaw = flaws[turn["event_id"]]
        sc = scenarios[flaw["scenario"]]
        index = turn["turn_index"]
        high = clean_answer(sc, index, "full", "terse")
        probes.append(
            {
                "id": f"{flaw['scenario']}-{index}",
                "case": turn["case"],
                "history": turn["history"],
                "query": turn["query"],
                "contexts": turn["contexts"],
                "reference": clean_answer(sc, index, "full", "chatty"),
                "baselines": {"high": high, "medium": medium(high), "low": low(sc, high, rng)},
            }
        )
    return probes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=HERE / "probes.jsonl")
    args = parser.parse_args(argv)
    with args.out.open("w", encoding="utf-8") as f:
        for probe in build():
            f.write(json.dumps(probe, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
