"""The synthetic example dataset in examples/: valid, complete, reproducible, and scored by the
heuristic judge the way it was built (each injected flaw lands in the metric it targets)."""

import json
import statistics
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from monitor.judging.heuristic.judge import HeuristicJudge
from monitor.schema.turn import METRICS, Band, JudgeScores, TurnEvent
from monitor.scoring import turn as scoring

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
GENERATED = ["turns-stable.jsonl", "turns-canary.jsonl", "turns.jsonl"]
GENERATED += ["human_labels.jsonl", "flaws.jsonl", "judge_canary.jsonl"]
STABLE, CANARY = "acme-support-stable", "acme-support-canary"


def rows(name: str) -> list[dict[str, Any]]:
    with (EXAMPLES / name).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def turns(name: str) -> list[TurnEvent]:
    with (EXAMPLES / name).open(encoding="utf-8") as f:
        return [TurnEvent.model_validate_json(line) for line in f]


@pytest.fixture(scope="module")
def judged() -> dict[str, JudgeScores]:
    judge = HeuristicJudge()
    out = {}
    for t in turns("turns.jsonl"):
        j = judge.judge(t)
        assert j.scores is not None
        out[t.event_id] = j.scores
    return out


@pytest.fixture(scope="module")
def flaws() -> dict[str, dict[str, Any]]:
    return {r["event_id"]: r for r in rows("flaws.jsonl")}


def test_committed_files_equal_a_fresh_run(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(EXAMPLES / "generate.py"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    for name in GENERATED:
        assert (tmp_path / name).read_bytes() == (EXAMPLES / name).read_bytes(), name


def test_every_line_is_a_valid_turn_event() -> None:
    stable, canary, both = (turns(n) for n in GENERATED[:3])
    assert {t.assistant.name for t in stable} == {STABLE}
    assert {t.assistant.name for t in canary} == {CANARY}
    assert sorted(t.event_id for t in both) == sorted(t.event_id for t in stable + canary)
    stamps = [t.timestamp for t in both]
    assert stamps == sorted(stamps)


def test_both_assistants_answer_the_same_multi_turn_cases() -> None:
    stable, canary = turns("turns-stable.jsonl"), turns("turns-canary.jsonl")
    assert len(stable) == len(canary) >= 72
    per_conversation = Counter(t.conversation_id for t in stable)
    assert len(per_conversation) >= 24 and set(per_conversation.values()) == {3}
    key = {(t.conversation_id, t.turn_index, t.query, t.case.subject) for t in stable}
    assert key == {(t.conversation_id, t.turn_index, t.query, t.case.subject) for t in canary}
    assert {t.assistant.version for t in stable} == {"2026.10"}
    assert {t.assistant.version for t in canary} == {"2026.11"}
    assert len({t.event_id for t in stable + canary}) == len(stable) * 2
    for t in stable:
        assert len(t.history) == 2 * t.turn_index
        assert 2 <= len(t.contexts) <= 4


def test_feedback_and_labels_are_present() -> None:
    both = turns("turns.jsonl")
    assert sum(t.feedback is not None and t.feedback.rating == "negative" for t in both) >= 3
    assert sum(bool(t.labels) for t in both) >= 10
    assert {k for t in both for k in t.labels} == {"channel", "tier"}


def test_each_kind_of_flaw_is_injected_several_times(flaws: dict[str, dict[str, Any]]) -> None:
    kinds = Counter(f["flaw"] for f in flaws.values())
    for kind in (
        "corrupted_identifier",
        "hallucinated_step",
        "repeated_step",
        "insufficient_appropriate",
        "insufficient_inappropriate",
        "off_topic",
    ):
        assert kinds[kind] >= 3, kind
    variants = Counter(f["variant"] for f in flaws.values() if f["flaw"] == "corrupted_identifier")
    assert set(variants) == {"error", "version", "flag", "path"}
    flawed = Counter(f["assistant"] for f in flaws.values() if f["flaw"] != "none")
    assert flawed[CANARY] > flawed[STABLE]


def test_human_labels_cover_both_assistants_and_all_metrics() -> None:
    labels = rows("human_labels.jsonl")
    known = {t.event_id: t.assistant.name for t in turns("turns.jsonl")}
    assert len(labels) >= 30
    assert {known[r["event_id"]] for r in labels} == {STABLE, CANARY}
    bands = {b.value for b in Band}
    for r in labels:
        assert set(r["labels"]) == set(METRICS)
        assert set(r["labels"].values()) <= bands


# ---------------------------------------------------------------- the heuristic on the dataset

# Injected flaw -> (metric it targets, the worst band the judge may leave it in).
TARGETS = {
    "corrupted_identifier": ("identifier_integrity", Band.SEVERE),
    "hallucinated_step": ("hallucination", Band.MODERATE),
    "repeated_step": ("resolution_alignment", Band.SEVERE),
    "off_topic": ("case_issue_identification", Band.SEVERE),
    "insufficient_inappropriate": ("answer_helpfulness", Band.MODERATE),
}


@pytest.mark.parametrize("flaw", sorted(TARGETS))
def test_each_injected_flaw_lowers_its_metric(
    flaw: str, judged: dict[str, JudgeScores], flaws: dict[str, dict[str, Any]]
) -> None:
    metric, at_best = TARGETS[flaw]
    hit = [e for e, f in flaws.items() if f["flaw"] == flaw]
    for event_id in hit:
        got = scoring.band(judged[event_id].get(metric).score)
        assert got.rank <= at_best.rank, (event_id, metric, got)


def test_clean_answers_score_high(
    judged: dict[str, JudgeScores], flaws: dict[str, dict[str, Any]]
) -> None:
    clean = [e for e, f in flaws.items() if f["flaw"] == "none" and f["retrieval"] == "full"]
    assert len(clean) >= 60
    none = Counter(scoring.turn_band(judged[e].score_map(), scoring.DEFAULT_PROFILE) for e in clean)
    assert none[Band.NONE] >= 0.9 * len(clean)


def test_the_canary_scores_worse_than_the_stable_assistant(
    judged: dict[str, JudgeScores],
) -> None:
    by_assistant: dict[str, list[float]] = defaultdict(list)
    for t in turns("turns.jsonl"):
        s = scoring.s_final(judged[t.event_id].score_map(), scoring.DEFAULT_PROFILE)
        by_assistant[t.assistant.name].append(s)
    assert statistics.fmean(by_assistant[CANARY]) < statistics.fmean(by_assistant[STABLE])


# ---------------------------------------------------------------- the held-out set

HELDOUT = EXAMPLES / "heldout"


def test_heldout_files_equal_a_fresh_build(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(HELDOUT / "build.py"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    for name in ("dev.jsonl", "test.jsonl", "dev-labels.jsonl", "test-labels.jsonl"):
        assert (tmp_path / name).read_bytes() == (HELDOUT / name).read_bytes(), name


def test_heldout_splits_are_disjoint_and_fully_labelled() -> None:
    ids: dict[str, set[str]] = {}
    for split in ("dev", "test"):
        with (HELDOUT / f"{split}.jsonl").open(encoding="utf-8") as f:
            events = [TurnEvent.model_validate_json(line) for line in f]
        with (HELDOUT / f"{split}-labels.jsonl").open(encoding="utf-8") as f:
            labels = {r["event_id"]: r["labels"] for r in map(json.loads, f)}
        ids[split] = {e.event_id for e in events}
        assert set(labels) == ids[split]
        for bands in labels.values():
            assert set(bands) == set(METRICS)
            assert all(Band(b) for b in bands.values())
    assert not ids["dev"] & ids["test"]
    assert len(ids["dev"]) + len(ids["test"]) >= 60
    assert len(ids["test"]) >= 40
