"""Generate the synthetic example dataset: two assistant versions answering the same cases.

Run from the repository root with the project's interpreter:

    .venv/bin/python examples/generate.py            # rewrites the files in examples/
    .venv/bin/python examples/generate.py --out DIR  # writes them somewhere else

Deterministic: a fixed seed, no clock, no network. The committed files must equal a fresh run
(tests/test_examples.py checks that). The cases come from scenarios.yaml and the answers from
casebook.py; this script decides which turn gets which flaw, builds the turn events, and writes
what was injected (flaws.jsonl) and the bands a reviewer gives each kind of flaw
(human_labels.jsonl). See README.md.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from casebook import (
    Scenario,
    clean_answer,
    corrupted_answer,
    eligible,
    hallucinated_answer,
    inappropriate_answer,
    load_scenarios,
    off_topic_answer,
    queries,
    repeated_answer,
)

from monitor.schema.turn import METRICS, TurnEvent

SEED = 20261102
HERE = Path(__file__).resolve().parent
START = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)
ASSISTANTS = {
    "stable": {"name": "acme-support-stable", "version": "2026.10", "model": "gpt-4o-mini"},
    "canary": {"name": "acme-support-canary", "version": "2026.11", "model": "llama-3.3-70b"},
}
# Flaws injected into turns whose retrieval is complete, per assistant: the canary is worse.
FLAW_BUDGET: dict[str, list[tuple[str, str]]] = {
    "stable": [
        ("corrupted_identifier", "error"),
        ("corrupted_identifier", "flag"),
        ("hallucinated_step", ""),
        ("hallucinated_step", ""),
        ("repeated_step", ""),
        ("repeated_step", ""),
        ("insufficient_inappropriate", ""),
        ("off_topic", ""),
    ],
    "canary": [
        *[("corrupted_identifier", v) for v in ("error", "version", "flag", "path") for _ in "ab"],
        *[("hallucinated_step", "")] * 5,
        *[("repeated_step", "")] * 5,
        *[("insufficient_inappropriate", "")] * 3,
        *[("off_topic", "")] * 3,
    ],
}
PARTIAL_TURNS = 4  # turn 0 retrieves the overview article but not the steps
MISSED_TURNS = 5  # turns 1-2 retrieve only other products' articles
# On those thin turns the stable assistant says what is missing; the canary sometimes invents.
CANARY_INVENTS = {"partial": 2, "miss": 3}
# Each model has its own voice; the conversation history is the stable (production) transcript.
STYLE = {"stable": "terse", "canary": "chatty"}
LABEL_CHOICES = {"channel": ["web", "slack", "email"], "tier": ["enterprise", "standard"]}
NEGATIVE_COMMENTS = {
    "off_topic": "This is about a different product.",
    "insufficient_inappropriate": "Not helpful, the article is right there.",
    "repeated_step": "I already told you I did that.",
    "hallucinated_step": "That command does not exist.",
    "corrupted_identifier": "The command failed.",
}

Slot = tuple[int, int]  # (conversation index, turn index)


# ---------------------------------------------------------------- what a reviewer assigns


def reviewer_bands(flaw: str, retrieval: str, asks: str) -> dict[str, str]:
    """The bands a reviewer gives a turn built this way (from construction, not from a judge).

    ``asks`` is what the user's message calls for: "instruct", "explain" or "clarify".
    """
    bands = dict.fromkeys(METRICS, "none")
    bands["retrieval_correctness"], bands["context_sufficiency"] = {
        "full": ("none", "none"),
        "partial": ("minor", "moderate"),
        "miss": ("severe", "severe"),
    }[retrieval]
    if flaw == "insufficient_appropriate":
        bands["answer_helpfulness"] = "minor"
    elif flaw == "corrupted_identifier":
        bands.update(
            identifier_integrity="severe",
            hallucination="minor",
            answer_helpfulness="minor",
            resolution_alignment="minor",
        )
    elif flaw == "hallucinated_step" and retrieval == "miss":
        # A made-up cause and made-up steps: names the right code, misdiagnoses the issue.
        bands.update(
            hallucination="severe",
            answer_helpfulness="moderate",
            resolution_alignment="moderate",
            case_issue_identification="minor",
        )
        if asks == "clarify":
            bands["answer_type_fit"] = "minor"
    elif flaw == "hallucinated_step":
        bands.update(
            hallucination="moderate", answer_helpfulness="minor", resolution_alignment="minor"
        )
    elif flaw == "repeated_step":
        # A step the user said was already tried, put back unacknowledged, is
        # resolution_alignment severe (it was moderate before; see README.md).
        bands.update(resolution_alignment="severe", answer_helpfulness="minor")
    elif flaw == "insufficient_inappropriate":
        bands.update(
            answer_helpfulness="moderate",
            answer_type_fit="moderate",
            case_issue_identification="minor",
            resolution_alignment="minor",
        )
    elif flaw == "off_topic":
        bands.update(
            case_issue_identification="severe",
            answer_helpfulness="severe",
            answer_type_fit="minor",
            resolution_alignment="moderate",
        )
    return bands


# ---------------------------------------------------------------- the plan


def needed_parts(sc: Scenario, turn: int) -> list[int]:
    if turn == 0:
        return [1, 2]
    if turn == 1:
        return [3, 2]
    return [1, 3] if sc["t2"] == "why" else [3, 2]


def plan_retrieval(n: int, rng: random.Random) -> dict[Slot, str]:
    plan = {(c, t): "full" for c in range(n) for t in range(3)}
    for c in rng.sample(range(n), PARTIAL_TURNS):
        plan[(c, 0)] = "partial"
    for slot in rng.sample([(c, t) for c in range(n) for t in (1, 2)], MISSED_TURNS):
        plan[slot] = "miss"
    return plan


def contexts_for(
    scenarios: Sequence[Scenario], c: int, turn: int, retrieval: str, rng: random.Random
) -> list[dict[str, Any]]:
    sc = scenarios[c]
    relevant = {"full": needed_parts(sc, turn), "partial": [1], "miss": []}[retrieval]
    others = [o for o in scenarios if o["family"] != sc["family"]]
    picked = rng.sample(others, 3 - len(relevant))
    chunks = [(sc.chunk(p), rng.uniform(0.71, 0.92)) for p in relevant]
    chunks += [(o.chunk(rng.choice((2, 3))), rng.uniform(0.32, 0.58)) for o in picked]
    chunks.sort(key=lambda item: -item[1])
    return [{**chunk, "score": round(score, 3)} for chunk, score in chunks]


def plan_flaws(
    assistant: str,
    clean: dict[Slot, str],
    retrieval: dict[Slot, str],
    scenarios: Sequence[Scenario],
    rng: random.Random,
) -> dict[Slot, tuple[str, str]]:
    plan: dict[Slot, tuple[str, str]] = {}
    for kind in ("partial", "miss"):
        thin = sorted(s for s, r in retrieval.items() if r == kind)
        inventing = set(rng.sample(thin, CANARY_INVENTS[kind])) if assistant == "canary" else set()
        for slot in thin:
            plan[slot] = (
                ("hallucinated_step", "") if slot in inventing else ("insufficient_appropriate", "")
            )
    for flaw, variant in FLAW_BUDGET[assistant]:
        free = [
            s
            for s in sorted(clean)
            if retrieval[s] == "full"
            and s not in plan
            and eligible(scenarios[s[0]], clean[s], variant)
        ]
        plan[rng.choice(free)] = (flaw, variant)
    return plan


# ---------------------------------------------------------------- events


def flawed_answer(
    assistant: str,
    sc: Scenario,
    slot: Slot,
    flaw: tuple[str, str],
    clean: str,
    retrieval: str,
    contexts: list[dict[str, Any]],
    scenarios: Sequence[Scenario],
    rng: random.Random,
) -> tuple[str, dict[str, str]]:
    kind, variant = flaw
    if kind == "corrupted_identifier":
        return corrupted_answer(sc, clean, variant)
    if kind == "hallucinated_step":
        return hallucinated_answer(sc, clean, retrieval, rng)
    if kind == "repeated_step":
        return repeated_answer(sc, slot[1], STYLE[assistant], clean)
    if kind == "insufficient_inappropriate":
        return inappropriate_answer(sc, rng), {}
    if kind == "off_topic":
        by_kb = {o["kb"].lower(): o for o in scenarios}
        foreign = [c for c in contexts if not c["id"].startswith(sc["kb"].lower() + "#")]
        target = foreign[0]
        kb, part = target["id"].split("#")
        return off_topic_answer(by_kb[kb], int(part)), {"answered_from": target["id"]}
    return clean, {}


@dataclass(frozen=True)
class Conversation:
    """What both assistants share: the case, the user's turns, retrieval and the transcript."""

    index: int
    scenario: Scenario
    times: list[datetime]
    queries: list[str]
    retrieval: list[str]
    contexts: list[list[dict[str, Any]]]
    transcript: list[str]  # the production (stable, reference) answers the history shows
    labels: dict[str, str]

    @property
    def id(self) -> str:
        return f"conv-{self.index + 1:04d}"

    def asks(self, turn: int) -> str:
        """What the user's message at this turn calls for."""
        if turn < 2:  # turns 0 and 1 ask how to fix it
            return "instruct"
        return "explain" if self.scenario["t2"] == "why" else "clarify"

    def history(self, turn: int) -> list[dict[str, str]]:
        history = []
        for k in range(turn):
            history.append({"role": "user", "content": self.queries[k]})
            history.append({"role": "assistant", "content": self.transcript[k]})
        return history


def conversations(scenarios: Sequence[Scenario], rng: random.Random) -> list[Conversation]:
    retrieval = plan_retrieval(len(scenarios), rng)
    out = []
    clock = START
    for c, sc in enumerate(scenarios):
        clock += timedelta(minutes=rng.randint(25, 70))
        times = [clock]
        for _ in range(2):
            times.append(times[-1] + timedelta(minutes=rng.randint(3, 9)))
        kinds = [retrieval[(c, t)] for t in range(3)]
        qs = queries(sc, rng, kinds[0] == "partial")
        contexts = [contexts_for(scenarios, c, t, kinds[t], rng) for t in range(3)]
        transcript = [clean_answer(sc, t, kinds[t]) for t in range(3)]
        routed = rng.random() < 0.7  # most channels attach routing labels
        labels = {k: rng.choice(v) for k, v in LABEL_CHOICES.items()} if routed else {}
        out.append(Conversation(c, sc, times, qs, kinds, contexts, transcript, labels))
    return out


def build(scenarios: Sequence[Scenario]) -> dict[str, list[dict[str, Any]]]:
    rng = random.Random(SEED)  # noqa: S311 -- reproducible synthetic data, not secrets
    convs = conversations(scenarios, rng)
    retrieval = {(cv.index, t): cv.retrieval[t] for cv in convs for t in range(3)}
    out: dict[str, list[dict[str, Any]]] = {"events": [], "flaws": [], "labels": []}
    for assistant, info in ASSISTANTS.items():
        voice = {
            (c, t): clean_answer(scenarios[c], t, kind, STYLE[assistant])
            for (c, t), kind in retrieval.items()
        }
        flaws = plan_flaws(assistant, voice, retrieval, scenarios, rng)
        labelled_clean = set(rng.sample(sorted(s for s in voice if s not in flaws), 8))
        for cv in convs:
            for t in range(3):
                slot = (cv.index, t)
                flaw = flaws.get(slot, ("none", ""))
                answer, detail = flawed_answer(
                    assistant, cv.scenario, slot, flaw, voice[slot], cv.retrieval[t],
                    cv.contexts[t], scenarios, rng,
                )  # fmt: skip
                shadow = rng.randint(2, 25) if assistant == "canary" else 0
                event = _event(info, cv, t, answer, timedelta(seconds=shadow))
                feedback = _feedback(flaw[0], rng)
                if feedback is not None:
                    event["feedback"] = feedback
                TurnEvent.model_validate(event)
                out["events"].append(event)
                out["flaws"].append(
                    {
                        "event_id": event["event_id"],
                        "assistant": info["name"],
                        "scenario": cv.scenario["key"],
                        "turn_index": t,
                        "retrieval": cv.retrieval[t],
                        "asks": cv.asks(t),
                        "flaw": flaw[0],
                        "variant": flaw[1],
                        "detail": detail,
                    }
                )
                if flaw[0] != "none" or cv.retrieval[t] != "full" or slot in labelled_clean:
                    bands = reviewer_bands(flaw[0], cv.retrieval[t], cv.asks(t))
                    out["labels"].append({"event_id": event["event_id"], "labels": bands})
    return out


def _event(
    info: dict[str, str], cv: Conversation, turn: int, answer: str, shadow: timedelta
) -> dict[str, Any]:
    sc = cv.scenario
    return {
        "event_id": f"{info['name']}-{cv.id}-{turn}",
        "conversation_id": cv.id,
        "turn_index": turn,
        "timestamp": (cv.times[turn] + shadow).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "assistant": info,
        "case": {
            "subject": sc["subject"],
            "description": sc["description"],
            "product": sc["product"],
            "environment": sc["environment"],
        },
        "history": cv.history(turn),
        "query": cv.queries[turn],
        "contexts": cv.contexts[turn],
        "answer": answer,
        "labels": cv.labels,
    }


def _feedback(flaw: str, rng: random.Random) -> dict[str, str] | None:
    roll = rng.random()
    if flaw in NEGATIVE_COMMENTS and roll < 0.45:
        return {"rating": "negative", "comment": NEGATIVE_COMMENTS[flaw]}
    if flaw == "none" and roll < 0.12:
        return {"rating": "positive"}
    return None


def _write(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    path.write_text(text, encoding="utf-8")


CANARY_TURNS = 24


def _canary(events: Sequence[dict[str, Any]], labels: Sequence[dict[str, Any]]) -> list[Any]:
    """The judge canary set (casewatch's judge_canary.file): the stable assistant's labelled
    turns, each with the bands people gave it."""
    by_id = {e["event_id"]: e for e in events}
    stable = ASSISTANTS["stable"]["name"]
    rows = [
        {"turn": by_id[r["event_id"]], "labels": r["labels"]}
        for r in sorted(labels, key=lambda r: r["event_id"])
        if by_id[r["event_id"]]["assistant"]["name"] == stable
    ]
    return rows[:CANARY_TURNS]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="output directory")
    args = parser.parse_args(argv)
    out_dir: Path = args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    data = build(load_scenarios(HERE / "scenarios.yaml"))
    events = data["events"]
    by_time = sorted(events, key=lambda e: (e["timestamp"], e["event_id"]))
    for assistant, info in ASSISTANTS.items():
        mine = [e for e in by_time if e["assistant"]["name"] == info["name"]]
        _write(out_dir / f"turns-{assistant}.jsonl", mine)
    _write(out_dir / "turns.jsonl", by_time)
    _write(out_dir / "flaws.jsonl", sorted(data["flaws"], key=lambda r: r["event_id"]))
    _write(out_dir / "human_labels.jsonl", sorted(data["labels"], key=lambda r: r["event_id"]))
    _write(out_dir / "judge_canary.jsonl", _canary(events, data["labels"]))
    print(f"wrote {len(events)} turns, {len(data['labels'])} labelled, to {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
