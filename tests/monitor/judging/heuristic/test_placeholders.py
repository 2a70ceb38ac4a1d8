"""Redaction placeholders are identifiers to the heuristic judge and the tripwire."""

from __future__ import annotations

import pytest

from monitor.judging.heuristic.identifiers import check, extract
from monitor.judging.heuristic.judge import score_turn
from monitor.judging.heuristic.kinds import IdKind
from monitor.judging.heuristic.tokens import fills_template
from monitor.judging.heuristic.tripwire import identifier_tripwire
from monitor.redaction import RedactionPolicy, Redactor
from monitor.schema.turn import TurnEvent
from tests.consumers.turns import turn
from tests.monitor.judging.heuristic.tripwire_corpus import turns as corpus_turns

CARD = "4111 1111 1111 1111"
OTHER_CARD = "5555 5555 5555 4444"


def _redacted(answer_card: str, key: bytes | None = None) -> TurnEvent:
    raw = turn(
        case={"subject": "Double charge", "description": f"Card {CARD} charged twice"},
        query=f"Was the second charge on {CARD} refunded?",
        contexts=[{"id": "kb-1", "text": "Refunds go back to the card charged (KB-40213)."}],
        answer=f"Yes, the second charge on {answer_card} was refunded (KB-40213).",
    )
    return Redactor(RedactionPolicy(key=key)).redact_turn(raw).turn


def test_a_placeholder_is_one_id_not_a_config_key() -> None:
    found = extract("Run `acme-admin mfa reset --user <EMAIL_1>` for <CARD_2>.")
    kinds = {(i.kind, i.raw) for i in found}
    assert (IdKind.ID, "<EMAIL_1>") in kinds and (IdKind.ID, "<CARD_2>") in kinds
    assert not [
        i for i in found if "EMAIL_1" in i.raw and i.kind not in (IdKind.ID, IdKind.COMMAND)
    ]


def test_placeholders_compare_by_kind() -> None:
    evidence = extract("card <CARD_1>, mail <EMAIL_1>")
    same = check(extract("refund to <CARD_1>"), evidence)
    assert [i.raw for i in same.matched] == ["<CARD_1>"]
    other = check(extract("refund to <CARD_2>"), evidence)
    assert [(m.found.raw, m.expected.raw) for m in other.near_misses] == [("<CARD_2>", "<CARD_1>")]
    unrelated = check(extract("call <PHONE_1>"), evidence)
    assert unrelated.near_misses == () and [i.raw for i in unrelated.novel] == ["<PHONE_1>"]


def test_a_placeholder_in_a_documented_command_is_a_value_not_a_slot() -> None:
    assert fills_template("acme-admin mfa reset --user bob", "acme-admin mfa reset --user <user>")
    assert not fills_template(
        "acme-admin mfa reset --user <EMAIL_2>", "acme-admin mfa reset --user <EMAIL_1>"
    )


@pytest.mark.parametrize("key", [None, b"k" * 32], ids=["numbered", "keyed"])
def test_the_tripwire_trips_on_another_card_in_the_answer(key: bytes | None) -> None:
    assert not identifier_tripwire(_redacted(CARD, key))
    hit = identifier_tripwire(_redacted(OTHER_CARD, key))
    assert hit.kinds == ("id",)
    # a mistyped copy of the customer's card is another card too
    assert identifier_tripwire(_redacted("4111 1111 1111 1112", key)).kinds == ("id",)


def test_the_heuristic_judge_marks_down_another_card() -> None:
    same = score_turn(_redacted(CARD)).identifier_integrity.score
    other = score_turn(_redacted(OTHER_CARD)).identifier_integrity.score
    assert other < same


def test_redaction_hides_no_corruption_of_the_tripwire_corpus() -> None:
    # Every example turn and its corrupted copies: a turn that trips the tripwire as consumed
    # trips it as the redaction step hands it on (bench/redaction_tripwire.py prints the diff).
    redactor = Redactor(RedactionPolicy())
    lost = [
        key
        for key, t in corpus_turns()
        if identifier_tripwire(t) and not identifier_tripwire(redactor.redact_turn(t).turn)
    ]
    assert lost == []
