"""``TurnDecisions``: what the steps decide about one record, and what a screening process gets
pickled decides the same, a ``format: mapped`` topic's mapping included; over a batch
(``unjudged_turns``, what the process runs) each record is decided as the steps' parts decide
it one by one."""

from __future__ import annotations

import json
import pickle

import pytest

from monitor.config.sampling import AlwaysJudgeRule, SamplingConfig
from monitor.errors import InvalidEvent
from monitor.redaction.config import RedactionConfig
from monitor.schema.mapping import TurnMapping
from monitor.stream.steps.decisions import TurnDecisions, Unredactable
from tests.fixtures.databases import make_turn
from tests.monitor.stream.steps.helpers import chain_decisions, part_by_part

MAPPING = {
    "event_id": "id",
    "conversation_id": "thread",
    "timestamp": "ts",
    "assistant.name": "bot",
    "query": "ask",
    "answer": "reply",
    "feedback": "review",
}
SAMPLING = SamplingConfig(
    default_rate=0.0,
    always_judge=[AlwaysJudgeRule(name="negative", field="feedback", equals="negative")],
)
EMAIL = "jane.doe@example.com"


def _mapped(i: int, **extra: object) -> bytes:
    doc = {
        "id": f"m{i}",
        "thread": f"t{i}",
        "ts": "2026-03-01T10:15:30Z",
        "bot": "mapped-bot",
        "ask": f"My VPN drops, I am {EMAIL}",
        "reply": "Reinstall the VPN driver.",
        **extra,
    }
    return json.dumps(doc).encode()


def _decisions() -> TurnDecisions:
    mapping = TurnMapping.compile(MAPPING)
    return chain_decisions(
        SAMPLING,
        RedactionConfig(key="a pseudonymization key of 32 bytes."),
        decoders={"mapped": mapping.decode},
    )


RECORDS = [
    ("mapped", _mapped(1)),
    ("mapped", _mapped(2, review={"rating": "negative"})),
    ("mapped", b'{"id": "m3"}'),  # the mapping cannot fill it
    ("mapped", make_turn("native").model_dump_json().encode()),  # not this topic's shape
    ("turns", make_turn("native").model_dump_json().encode()),
    ("turns", _mapped(4)),  # another topic's shape
]


def test_a_topic_is_read_by_its_own_decoder() -> None:
    decisions = _decisions()
    assert decisions.decode("mapped", _mapped(1)).assistant.name == "mapped-bot"
    assert decisions.decode("turns", make_turn("n").model_dump_json().encode()).event_id == "n"
    for topic, value in (("turns", _mapped(1)), ("mapped", b'{"id": "m3"}')):
        try:
            decisions.decode(topic, value)
        except InvalidEvent:
            continue
        raise AssertionError(f"{topic}: {value!r} decoded")


def test_a_pickled_copy_decides_every_record_as_the_original() -> None:
    decisions = _decisions()
    # As a screening process gets them (its initializer's argument): our own bytes.
    copy = pickle.loads(pickle.dumps(decisions))  # noqa: S301
    assert isinstance(copy, TurnDecisions) and copy is not decisions
    marks = [decisions.finishes_unjudged(t, v) for t, v in RECORDS]
    assert [copy.finishes_unjudged(t, v) for t, v in RECORDS] == marks
    # The mapped turn without feedback is finished, under the mapping's assistant; the one a
    # rule selects, and the records the decode step dead-letters, go on.
    assert marks == ["mapped-bot", None, None, None, "helpdesk", None]
    for topic, value in RECORDS[:2]:
        turn = decisions.decode(topic, value)
        assert copy.decode(topic, value) == turn
        redacted, again = decisions.redact(turn), copy.redact(turn)
        assert not isinstance(redacted, Unredactable) and not isinstance(again, Unredactable)
        # The same key: the same pseudonyms.
        assert again.turn == redacted.turn and EMAIL not in redacted.turn.query
        assert copy.reason_for(redacted.turn) == decisions.reason_for(redacted.turn)
    assert copy.reason_for(decisions.decode(*RECORDS[1])) == "rule:negative"


def test_a_batch_decides_each_record_as_the_parts_do_one_by_one() -> None:
    decisions = _decisions()
    topics, values = [t for t, _ in RECORDS], [v for _, v in RECORDS]
    batch = list(decisions.unjudged_turns(values, topics))
    assert batch == [part_by_part(decisions, t, v) for t, v in RECORDS]
    # Redacted as the redact step forwards it, under the mapping's assistant.
    first = batch[0]
    assert first is not None and first.assistant.name == "mapped-bot"
    assert EMAIL not in first.query
    assert [turn is not None for turn in batch] == [True, False, False, False, True, False]
    # The rules only, no redaction, and no reasons at all (a chain that judges every turn).
    for other in (
        chain_decisions(SAMPLING, decoders={"mapped": TurnMapping.compile(MAPPING).decode}),
        TurnDecisions(1 << 20, decoders={"mapped": TurnMapping.compile(MAPPING).decode}),
    ):
        expected = [part_by_part(other, t, v) for t, v in RECORDS]
        assert list(other.unjudged_turns(values, topics)) == expected
    assert not any(TurnDecisions(1 << 20).unjudged_turns(values[3:], topics[3:]))


def test_a_batch_goes_without_topics_only_when_no_topic_has_its_own_decoder() -> None:
    values = [v for _, v in RECORDS]
    # casewatch's own turn event on every topic: the topic decides nothing.
    native = chain_decisions(SAMPLING, RedactionConfig(key="a pseudonymization key of 32 bytes."))
    assert native.only_decoder is not None
    without = list(native.unjudged_turns(values))
    assert without == list(native.unjudged_turns(values, ["any"] * len(values)))
    assert without == [part_by_part(native, "turns", v) for v in values]
    assert [turn is not None for turn in without] == [False, False, False, True, True, False]
    mapped = _decisions()
    with pytest.raises(ValueError, match="need their topic"):
        list(mapped.unjudged_turns(values))
    with pytest.raises(ValueError, match="5 topics for 6 records"):
        list(mapped.unjudged_turns(values, ["mapped"] * 5))
