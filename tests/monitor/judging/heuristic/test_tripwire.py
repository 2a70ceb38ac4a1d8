"""The identifier tripwire: the judge's near-miss rules on every turn, cheaply."""

import json
from pathlib import Path

import pytest

from monitor.judging.heuristic.tripwire import identifier_tripwire
from monitor.schema.turn import TurnEvent
from tests.monitor.judging.heuristic.tripwire_corpus import EXPECTED, decisions, turn

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        ("Open outbound TCP 9434 to cache.foundry.example.", "port"),
        ("Set FOUNDRY_CAHCE_DIR=/data/cache in /etc/foundry/runner.env.", "config_key"),
        ("Resize vol-data-4471 first.", "resource"),
        ("Reach cache.foundyr.example over HTTPS.", "hostname"),
        ("Call GET https://api.example.com/v1/invoices/{customer_id}/customers.", "url"),
        ("Upgrade: it is fixed in 4.8.3.", "version"),
        ("Run `sudo systemctl restart foundry-runer`.", "resource"),
    ],
)
def test_a_near_miss_of_each_kind_trips_it(answer: str, kind: str) -> None:
    hit = identifier_tripwire(turn(answer))
    assert hit
    assert kind in hit.kinds


@pytest.mark.parametrize(
    "answer",
    [
        # Copied verbatim.
        "Open port 9443 to cache.foundry.example and set FOUNDRY_CACHE_DIR.",
        # A filled-in placeholder and new, unrelated identifiers are not near misses.
        "GET https://api.example.com/v1/customers/cus_42/invoices, then open port 8080.",
        # No identifiers at all.
        "Please check the firewall rules with your network team.",
        "",
    ],
)
def test_clean_answers_do_not_trip_it(answer: str) -> None:
    hit = identifier_tripwire(turn(answer))
    assert not hit
    assert hit.kinds == ()


def test_it_agrees_with_the_identifier_labels_of_the_calibration_set() -> None:
    """Every turn people label identifier_integrity severe trips it, and no other does."""
    with (EXAMPLES / "human_labels.jsonl").open() as f:
        severe = {
            r["event_id"]: r["labels"]["identifier_integrity"] == "severe"
            for r in map(json.loads, f)
        }
    with (EXAMPLES / "turns.jsonl").open() as f:
        turns = [TurnEvent.model_validate_json(line) for line in f]
    tripped = {t.event_id: bool(identifier_tripwire(t)) for t in turns if t.event_id in severe}
    assert tripped == severe


def test_its_decisions_on_the_examples_and_their_corruptions_are_unchanged() -> None:
    """The near misses found on every example turn and ~1,000 corrupted copies are the ones
    recorded before the tripwire was made faster (tripwire_expected.json)."""
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))
    checked, hits = decisions()
    assert checked == expected["checked"]
    assert hits.keys() == expected["hits"].keys()
    assert hits == expected["hits"]


def test_an_ordinary_turn_is_checked_whole() -> None:
    assert not identifier_tripwire(turn("Open port 9443.")).truncated
    assert not identifier_tripwire(turn("Open outbound TCP 9434.")).truncated


def test_a_turn_past_its_bounds_is_checked_in_part_and_says_so() -> None:
    """Hundreds of corrupted keys over a ~1 MB context: it still trips, on the first ones in
    sorted order, and marks the turn truncated instead of comparing every pair."""
    keys = [f"cfg_key_{i:06d}" for i in range(40_000)]
    contexts = [{"id": f"kb-{j}", "text": " ".join(keys[j::40])} for j in range(40)]
    answer = " ".join(f"{k}x" for k in keys[:500])  # each one insertion away from a key
    hit = identifier_tripwire(turn(answer, contexts=contexts))
    assert hit.truncated
    assert hit.kinds == ("config_key",)
    assert hit.misses[0].expected.raw == "cfg_key_000000"
    assert 0 < len(hit.misses) < 500


def test_a_huge_answer_is_read_up_to_its_bound() -> None:
    answer = "Open outbound TCP 9434. " + "Nothing to see here. " * 5_000
    hit = identifier_tripwire(turn(answer))
    assert hit.truncated
    assert hit.kinds == ("port",)
