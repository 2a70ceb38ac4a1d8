"""The canary regression the demo injects (pure, on the committed examples)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.demo.examples import load_examples
from monitor.demo.producer import ReplayProducer
from monitor.demo.regression import (
    REGRESSION_FLAWS,
    load_flaws,
    plan_regression,
)

ROOT = Path(__file__).resolve().parents[3]
DOCS = load_examples(ROOT / "examples" / "turns.jsonl")
FLAWS = load_flaws(ROOT / "examples" / "flaws.jsonl")
CANARY, STABLE = "acme-support-canary", "acme-support-stable"


def _of(docs: list[dict[str, object]], name: str) -> list[dict[str, object]]:
    return [d for d in docs if d["assistant"]["name"] == name]  # type: ignore[index]


def test_the_canary_starts_healthy_and_regresses_to_its_flawed_answers() -> None:
    plan = plan_regression(DOCS, FLAWS)
    assert plan is not None
    assert (plan.canary, plan.stable) == (CANARY, STABLE)
    flawed_ids = {e for e, f in FLAWS.items() if f in REGRESSION_FLAWS and e.startswith(CANARY)}
    assert plan.flawed == len(flawed_ids) == 29
    assert plan.swapped == 29
    stable_answers = {
        (d["conversation_id"], d["turn_index"]): d["answer"] for d in _of(DOCS, STABLE)
    }
    for doc in _of(plan.healthy, CANARY):
        key = (doc["conversation_id"], doc["turn_index"])
        if doc["event_id"] in flawed_ids:  # the flawed answer is gone, the stable one stands in
            assert doc["answer"] == stable_answers[key]
        assert doc["assistant"]["name"] == CANARY  # type: ignore[index]
    regressed = _of(plan.regressed, CANARY)
    assert len(regressed) == len(_of(DOCS, CANARY)) == 72
    flawed_answers = {d["answer"] for d in _of(DOCS, CANARY) if d["event_id"] in flawed_ids}
    assert {d["answer"] for d in regressed} == flawed_answers  # every slot answers badly
    # The stable sibling is the same in both phases, and nothing else moves.
    assert _of(plan.healthy, STABLE) == _of(plan.regressed, STABLE) == _of(DOCS, STABLE)
    for phase in (plan.healthy, plan.regressed):
        assert len(phase) == len(DOCS)
        assert len({d["event_id"] for d in phase}) == len(phase)  # idempotency keys stay unique


def test_the_regression_changes_the_canary_answers_only_not_its_inputs() -> None:
    # The demo's drift run flagged product, environment and retrieval_score on the
    # canary. The regressed phase replayed the 29 flawed turns whole, so the canary's inputs
    # became those turns' mix. Now each slot keeps its own inputs; only the answer changes.
    plan = plan_regression(DOCS, FLAWS)
    assert plan is not None
    original = _of(DOCS, CANARY)
    for before, after in zip(original, _of(plan.regressed, CANARY), strict=True):
        assert str(after["event_id"]).startswith(f"{before['event_id']}~r")
        inputs = {k: v for k, v in before.items() if k not in ("answer", "event_id")}
        assert {k: v for k, v in after.items() if k not in ("answer", "event_id")} == inputs
    for before, after in zip(original, _of(plan.healthy, CANARY), strict=True):
        assert after["case"] == before["case"] and after["contexts"] == before["contexts"]


def test_no_pair_or_no_flaws_means_no_regression(tmp_path: Path) -> None:
    assert plan_regression(_of(DOCS, CANARY), FLAWS) is None  # no stable sibling
    assert plan_regression(DOCS, {}) is None  # nothing flawed to regress to
    assert plan_regression([], FLAWS) is None


def test_flaws_file_missing_or_bad_lines(tmp_path: Path) -> None:
    assert load_flaws(tmp_path / "missing.jsonl") == {}
    path = tmp_path / "flaws.jsonl"
    good = {"event_id": "e1", "flaw": "off_topic"}
    path.write_text("not json\n[1, 2]\n" + json.dumps(good) + "\n")
    assert load_flaws(path) == {"e1": "off_topic"}  # the bad lines are skipped


def test_replacing_the_replayed_docs_needs_some() -> None:
    producer = ReplayProducer("127.0.0.1:1", "t", DOCS, rate=1.0)  # never started
    with pytest.raises(ValueError, match="at least one"):
        producer.replace_docs([])
