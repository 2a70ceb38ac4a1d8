"""``casewatch cascade check`` on SQLite and PostgreSQL: the example turns, judged by an "LLM
judge" that agrees with the human labels (the cheap look follows it: pays) or that calls
severe at random (the cheap look cannot follow it: no saving); an empty store exits 2."""

from __future__ import annotations

import json
import random

from click.testing import CliRunner

from monitor.cli import main
from monitor.judging.verdicts import scored_verdict
from monitor.schema.turn import METRICS, TurnEvent
from monitor.scoring.turn import BUILTIN_PROFILES, DEFAULT_CRITICAL_METRICS
from monitor.storage.store import Store
from tests.fixtures.databases import make_judgment
from tests.support.cli_judging import EXAMPLES


def _examples() -> tuple[list[TurnEvent], dict[str, bool]]:
    turns = {}
    for name in ("turns.jsonl", "turns-canary.jsonl", "turns-stable.jsonl"):
        for line in (EXAMPLES / name).read_text().splitlines():
            if line.strip():
                t = TurnEvent.model_validate_json(line)
                turns[t.event_id] = t
    severe = {}
    for line in (EXAMPLES / "human_labels.jsonl").read_text().splitlines():
        doc = json.loads(line)
        critical = (doc["labels"].get(m) for m in DEFAULT_CRITICAL_METRICS)
        severe[doc["event_id"]] = any(band == "severe" for band in critical)
    labelled = [turns[e] for e in severe if e in turns]
    return labelled, severe


def _store(store: Store, llm_severe: dict[str, bool], turns: list[TurnEvent]) -> None:
    for turn in turns:
        score = 0.1 if llm_severe[turn.event_id] else 0.95
        verdict = scored_verdict(
            turn,
            dict.fromkeys(METRICS, score),
            [make_judgment("primary", score=score)],  # an LLM judge's judgment (kind openai)
            weights=BUILTIN_PROFILES["default"],
            weight_profile="default",
            critical=DEFAULT_CRITICAL_METRICS,
            judge_config_hash="cfg-llm",
        )
        store.save(turn, verdict)


def test_a_cheap_look_that_follows_the_judge_pays(store: Store) -> None:
    turns, severe = _examples()
    _store(store, severe, turns)
    result = CliRunner().invoke(main, ["cascade", "check", "--db", store.url, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["pairs"] == len(turns)
    assert doc["auroc"] > 0.75 and doc["verdict"] == "pays"
    assert sum(c["judged"] for c in doc["cells"]) == len(turns)
    text = CliRunner().invoke(main, ["cascade", "check", "--db", store.url])
    assert "verdict: pays" in text.output


def test_a_judge_the_cheap_look_cannot_follow_shows_no_saving(store: Store) -> None:
    turns, _ = _examples()
    rng = random.Random(5)
    coin = {t.event_id: rng.random() < 0.3 for t in turns}
    _store(store, coin, turns)
    result = CliRunner().invoke(main, ["cascade", "check", "--db", store.url, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["verdict"] in {"no saving", "marginal"}
    assert abs(doc["auroc"] - 0.5) < 0.2


def test_a_store_without_llm_verdicts_is_refused(store: Store) -> None:
    result = CliRunner().invoke(main, ["cascade", "check", "--db", store.url])
    assert result.exit_code == 2
    assert "no judged turn" in result.output or "no turn judged" in result.output
