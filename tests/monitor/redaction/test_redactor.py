"""Pseudonymization of whole turns: consistent within a turn, keyed across turns, bounded."""

from __future__ import annotations

import re

import pytest

from monitor.redaction import (
    PLACEHOLDER,
    RedactionPolicy,
    Redactor,
    TooLargeToRedact,
    is_placeholder,
)
from monitor.redaction.placeholders import Pseudonymizer
from monitor.schema.turn import TurnEvent
from tests.consumers.turns import turn

EMAIL = "Jane.Doe@Example.com"
CARD = "4111 1111 1111 1111"
PHONE = "+44 7911 123456"


def _pii_turn(answer_email: str = "jane.doe@example.com") -> object:
    return turn(
        case={"subject": f"Refund for {EMAIL}", "description": f"Card {CARD} charged twice"},
        history=[{"role": "user", "content": f"Call me on {PHONE}"}],
        query=f"Was {CARD} refunded? My login is {EMAIL}",
        contexts=[{"id": "kb-1", "text": "Refunds take 5 days (KB-40213)."}],
        answer=f"Yes: the refund to {CARD} went out; we wrote to {answer_email}.",
        reference=f"Refund issued to {CARD}.",
        labels={"customer": EMAIL, "tier": "gold"},
        feedback={"rating": "negative", "comment": f"ring {PHONE} please"},
        crm_note=f"vip, {EMAIL}",
    )


def test_the_same_value_gets_the_same_placeholder_across_fields() -> None:
    result = Redactor(RedactionPolicy()).redact_turn(_pii_turn())  # type: ignore[arg-type]
    t = result.turn
    assert t.case.subject == "Refund for <EMAIL_1>"
    assert t.case.description == "Card <CARD_1> charged twice"
    assert t.history[0].content == "Call me on <PHONE_1>"
    assert t.query == "Was <CARD_1> refunded? My login is <EMAIL_1>"
    assert t.answer == "Yes: the refund to <CARD_1> went out; we wrote to <EMAIL_1>."
    assert t.reference == "Refund issued to <CARD_1>."
    assert t.labels == {"customer": "<EMAIL_1>", "tier": "gold"}
    assert t.feedback is not None and t.feedback.comment == "ring <PHONE_1> please"
    assert (t.model_extra or {})["crm_note"] == "vip, <EMAIL_1>"
    assert t.contexts[0].text == "Refunds take 5 days (KB-40213)."
    assert t.event_id == "evt-1" and t.conversation_id == "conv-1"
    assert result.counts == {"email": 5, "card": 4, "phone": 2}


def test_a_different_value_gets_a_different_placeholder() -> None:
    result = Redactor(RedactionPolicy()).redact_turn(_pii_turn("jane.d0e@example.com"))  # type: ignore[arg-type]
    assert result.turn.answer.endswith("we wrote to <EMAIL_2>.")


def test_placeholders_carry_no_part_of_the_value() -> None:
    for key in (None, b"k" * 32):
        t = Redactor(RedactionPolicy(key=key)).redact_turn(_pii_turn()).turn  # type: ignore[arg-type]
        dumped = t.model_dump_json()
        for ph in PLACEHOLDER.finditer(dumped):
            assert is_placeholder(ph.group())
            ident = ph.group(2)
            assert not any(part in ident for part in ("1111", "7911", "123456"))
        for raw in (EMAIL, EMAIL.lower(), CARD, CARD.replace(" ", ""), PHONE, "123456"):
            assert raw not in dumped


def test_a_keyed_placeholder_is_stable_across_turns_and_depends_on_the_key() -> None:
    one = Redactor(RedactionPolicy(key=b"a" * 32))
    other = Redactor(RedactionPolicy(key=b"b" * 32))
    first = one.redact_turn(turn(query=f"mail {EMAIL}")).turn.query
    second = one.redact_turn(turn("evt-2", query=f"again {EMAIL.lower()}")).turn.query
    assert first.removeprefix("mail ") == second.removeprefix("again ")
    assert re.fullmatch(r"mail <EMAIL_[0-9a-f]{10}>", first)
    assert other.redact_turn(turn(query=f"mail {EMAIL}")).turn.query != first


def test_a_turn_over_the_bound_is_refused_not_passed_on() -> None:
    redactor = Redactor(RedactionPolicy(max_chars=100))
    with pytest.raises(TooLargeToRedact) as raised:
        redactor.redact_turn(turn(answer="x" * 200))
    assert raised.value.limit == 100 and raised.value.chars > 200
    with pytest.raises(TooLargeToRedact):
        redactor.redact_loose("y" * 101)


def test_operator_patterns_are_redacted_under_their_own_kind() -> None:
    policy = RedactionPolicy(patterns={"member_id": re.compile(r"\bMBR-\d{6}\b")})
    counts: dict[str, int] = {}
    out = Redactor(policy).redact_text("member MBR-123456 and MBR-123456", Pseudonymizer(), counts)
    assert out == "member <MEMBER_ID_1> and <MEMBER_ID_1>"
    assert counts == {"member_id": 2}
    assert is_placeholder("<MEMBER_ID_1>")


def test_overlaps_go_to_the_stronger_kind() -> None:
    # a card's digits could also be read as a phone number; the card wins
    redactor = Redactor(RedactionPolicy())
    assert redactor.redact_text("card 4111111111111111", Pseudonymizer()) == "card <CARD_1>"
    out = redactor.redact_text("Authorization: Bearer sk-proj-" + "aB3" * 10, Pseudonymizer())
    assert out == "Authorization: Bearer <SECRET_1>"


def test_kinds_can_be_switched_off() -> None:
    policy = RedactionPolicy(emails=False, phones=False)
    text = f"{EMAIL} {PHONE} {CARD}"
    assert Redactor(policy).redact_text(text, Pseudonymizer()) == f"{EMAIL} {PHONE} <CARD_1>"


def test_secret_names_without_a_secret_are_kept() -> None:
    redactor = Redactor(RedactionPolicy())
    for text in ("api_key: ${OPENAI_API_KEY}", "password: <redacted>", "token=GITHUB_TOKEN"):
        assert redactor.redact_text(text, Pseudonymizer()) == text
    assert redactor.redact_text("password: hunter2024!", Pseudonymizer()) == "password: <SECRET_1>"


def test_a_mistyped_copy_of_the_customers_card_or_iban_is_redacted_as_another_value() -> None:
    # One digit off: no longer Luhn- or mod-97-valid, but nearly the customer's number.
    t = turn(
        query="Was my card 4111 1111 1111 1111 refunded? IBAN DE89 3704 0044 0532 0130 00",
        answer="Yes, 4111 1111 1111 1112 was refunded to DE89 3704 0044 0532 0130 01.",
        contexts=[{"id": "kb-1", "text": "Order 1234 5678 9012 3456 ships today."}],
    )
    out = Redactor(RedactionPolicy()).redact_turn(t).turn
    assert out.query == "Was my card <CARD_1> refunded? IBAN <IBAN_1>"
    assert out.answer == "Yes, <CARD_2> was refunded to <IBAN_2>."
    # digits far from every card in the turn stay as written
    assert out.contexts[0].text == "Order 1234 5678 9012 3456 ships today."


def test_texts_remembered_clean_give_the_same_result_as_a_fresh_scan() -> None:
    redactor = Redactor(RedactionPolicy())
    clean_context = [{"id": "kb-1", "text": "Refunds take 5 days (KB-40213)."}]
    first = redactor.redact_turn(turn(query=f"card {CARD}", contexts=clean_context)).turn
    # the context is now remembered clean; a turn quoting the card there must still be redacted
    second = redactor.redact_turn(
        turn(query=f"card {CARD}", contexts=[{"id": "kb-2", "text": f"on file: {CARD}"}])
    ).turn
    assert first.query == second.query == "card <CARD_1>"
    assert second.contexts[0].text == "on file: <CARD_1>"
    fresh = Redactor(RedactionPolicy()).redact_turn(
        turn(query=f"card {CARD}", contexts=clean_context)
    )
    assert fresh.turn == first


def test_a_turn_without_findings_is_handed_back_as_is() -> None:
    t = turn()
    result = Redactor(RedactionPolicy()).redact_turn(t)
    assert result.turn is t and result.counts == {}


def test_a_remembered_passage_with_findings_redacts_as_a_fresh_scan() -> None:
    passage = (
        "Billing questions: write to Billing@Example.com or call +1 (415) 555-0132 between 9 and "
        f"5. Refunds go back to the card charged, e.g. {CARD}, or to IBAN "
        "DE89 3704 0044 0532 0130 00; never share a key like sk-proj-" + "aB3" * 10 + "."
    )
    assert len(passage) >= 128
    policy = RedactionPolicy(ips=True)
    redactor = Redactor(policy)

    def make(query: str) -> TurnEvent:
        return turn(query=query, contexts=[{"id": "kb-1", "text": passage}])

    queries = ["call 415-555-0132?", "mail billing@example.com?", f"card {CARD}?"]
    for query in queries:
        remembered = redactor.redact_turn(make(query))
        fresh = Redactor(policy).redact_turn(make(query))
        assert remembered.turn == fresh.turn and remembered.counts == fresh.counts
    last = redactor.redact_turn(make("call 415-555-0132?")).turn
    assert last.query == "call <PHONE_1>?" and "<PHONE_1>" in last.contexts[0].text
