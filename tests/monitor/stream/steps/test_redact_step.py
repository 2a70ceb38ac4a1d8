"""The redaction step, the redacting writer and the redacting dead-letter sink."""

from __future__ import annotations

import json

import pytest
from prometheus_client import CollectorRegistry

from consumers.dlq import FileDeadLetterSink, decode_file_value
from monitor.config.sampling import SamplingConfig
from monitor.errors import MessageRejected
from monitor.metrics.exporter import Metrics
from monitor.redaction import RedactionPolicy, Redactor
from monitor.redaction.config import RedactionConfig
from monitor.sampling.judging_redaction import JudgingRedaction
from monitor.schema.turn import TurnEvent, Verdict
from monitor.storage.store import SaveResult
from monitor.stream.recorder import StreamRecorder
from monitor.stream.steps.decisions import TurnDecisions
from monitor.stream.steps.decode import DecodeStep
from monitor.stream.steps.redact import (
    RedactingDeadLetterSink,
    RedactingWriter,
    RedactStep,
)
from tests.fixtures.databases import make_turn, make_verdict
from tests.monitor.stream.steps.helpers import TP, Recorder, chain_decisions, env, raw

EMAIL = "jane.doe@example.com"
CARD = "4111 1111 1111 1111"


def _redacting(redactor: Redactor, *, forward_redacted: bool = True) -> TurnDecisions:
    return TurnDecisions(100_000, redaction=JudgingRedaction(redactor, forward_redacted))


def _pii(event_id: str = "e1", **extra: object) -> TurnEvent:
    return make_turn(
        event_id,
        query=f"Refund {CARD} please, I am {EMAIL}",
        answer=f"Refunded {CARD}; receipt sent to {EMAIL}.",
        **extra,
    )


def test_the_next_step_sees_only_placeholders_and_kinds_are_counted() -> None:
    registry = CollectorRegistry()
    nxt, done = Recorder(), Recorder()
    step = RedactStep(
        nxt, done, _redacting(Redactor(RedactionPolicy())), StreamRecorder(Metrics(registry))
    )
    step.submit(env(_pii(), offset=3))
    out: TurnEvent = nxt.items[0].payload
    assert nxt.offsets == [3] and done.items == []
    assert out.query == "Refund <CARD_1> please, I am <EMAIL_1>"
    assert out.answer == "Refunded <CARD_1>; receipt sent to <EMAIL_1>."
    get = registry.get_sample_value
    assert get("casewatch_redactions_total", {"kind": "card"}) is None  # counted on poll
    step.poll()
    assert get("casewatch_redactions_total", {"kind": "card"}) == 2
    assert get("casewatch_redactions_total", {"kind": "email"}) == 2
    assert nxt.polls == 1


def test_a_turn_too_large_is_skipped_with_its_own_reason_never_passed_on() -> None:
    registry = CollectorRegistry()
    nxt, done = Recorder(), Recorder()
    step = RedactStep(
        nxt,
        done,
        _redacting(Redactor(RedactionPolicy(max_chars=200))),
        StreamRecorder(Metrics(registry)),
    )
    step.submit(env(_pii(reference="x" * 500), offset=4))
    assert nxt.items == [] and done.offsets == [4]
    labels = {"assistant": "helpdesk", "reason": "redaction_too_large"}
    assert registry.get_sample_value("casewatch_turns_skipped_total", labels) == 1


def test_the_bound_holds_also_when_only_storage_is_redacted() -> None:
    nxt, done = Recorder(), Recorder()
    redactor = Redactor(RedactionPolicy(max_chars=200))
    step = RedactStep(
        nxt,
        done,
        _redacting(redactor, forward_redacted=False),
        StreamRecorder(Metrics(CollectorRegistry())),
    )
    step.submit(env(_pii(), offset=1))
    step.submit(env(_pii("e2", reference="x" * 500), offset=2))
    assert nxt.offsets == [1] and nxt.items[0].payload.query.startswith(f"Refund {CARD}")
    assert done.offsets == [2]


def test_a_refused_turn_is_offered_again_without_redacting_twice() -> None:
    registry = CollectorRegistry()
    nxt, done = Recorder(capacity=0), Recorder()
    step = RedactStep(
        nxt, done, _redacting(Redactor(RedactionPolicy())), StreamRecorder(Metrics(registry))
    )
    message = env(_pii(), offset=5)
    with pytest.raises(MessageRejected):
        step.submit(message)
    nxt.capacity = None
    step.submit(message)
    step.poll()
    assert nxt.offsets == [5] and "<CARD_1>" in nxt.items[0].payload.query
    assert registry.get_sample_value("casewatch_redactions_total", {"kind": "card"}) == 2


def test_a_turn_too_large_is_dead_lettered_and_done_once_written(
    sink: FileDeadLetterSink,
) -> None:
    registry = CollectorRegistry()
    nxt, done = Recorder(), Recorder()
    step = RedactStep(
        nxt,
        done,
        _redacting(Redactor(RedactionPolicy(max_chars=200))),
        StreamRecorder(Metrics(registry)),
        dlq=sink,
    )
    step.submit(env(_pii(reference="x" * 500), offset=4))
    # Sent without waiting; done on the poll that sees it written, never passed on.
    assert nxt.items == [] and done.items == [] and step.dead_letters_pending == 1
    step.poll()
    assert nxt.items == [] and done.offsets == [4] and step.dead_letters_pending == 0
    records = [json.loads(line) for line in sink.path.read_text().splitlines()]
    assert [(r["offset"], r["reason"]) for r in records] == [(4, "redaction_too_large")]
    get = registry.get_sample_value
    assert get("casewatch_dead_letter_total", {"reason": "redaction_too_large"}) == 1
    labels = {"assistant": "helpdesk", "reason": "redaction_too_large"}
    assert get("casewatch_turns_skipped_total", labels) is None  # dead-lettered, not skipped


def test_a_turn_too_large_is_rejected_while_the_dead_letter_sink_refuses_it(
    sink: FileDeadLetterSink,
) -> None:
    sink.close()  # a sink that refuses writes, like an unreachable dead-letter topic
    registry = CollectorRegistry()
    nxt, done = Recorder(), Recorder()
    step = RedactStep(
        nxt,
        done,
        _redacting(Redactor(RedactionPolicy(max_chars=200))),
        StreamRecorder(Metrics(registry)),
        dlq=sink,
    )
    for _ in range(2):  # offered again later: rejected again, counted each time
        with pytest.raises(MessageRejected, match="dead-letter queue unavailable"):
            step.submit(env(_pii(reference="x" * 500), offset=4))
    step.poll()
    step.join(timeout=0)
    assert nxt.items == [] and done.items == [] and step.dead_letters_pending == 0
    get = registry.get_sample_value
    assert get("casewatch_dead_letters_held_total", {"why": "unavailable"}) == 2
    assert get("casewatch_dead_letter_total", {"reason": "redaction_too_large"}) is None


class _Writer:
    def __init__(self) -> None:
        self.saved: list[tuple[TurnEvent, Verdict]] = []

    def save_batch(self, items: object) -> SaveResult:
        self.saved.extend(items)  # type: ignore[call-overload]
        return SaveResult(len(self.saved), [])


def test_the_redacting_writer_stores_the_redacted_turn() -> None:
    registry = CollectorRegistry()
    writer = _Writer()
    redacting = RedactingWriter(
        writer, Redactor(RedactionPolicy()), StreamRecorder(Metrics(registry))
    )
    turn = _pii()
    assert redacting.save_batch([(turn, make_verdict(turn))]).inserted == 1
    stored = writer.saved[0][0].model_dump_json()
    assert EMAIL not in stored and CARD not in stored and "<EMAIL_1>" in stored
    assert registry.get_sample_value("casewatch_redactions_total", {"kind": "email"}) == 2


def test_poison_reaches_the_dead_letter_file_redacted(sink: FileDeadLetterSink) -> None:
    registry = CollectorRegistry()
    metrics = StreamRecorder(Metrics(registry))
    dlq = RedactingDeadLetterSink(sink, Redactor(RedactionPolicy()), metrics)
    step = DecodeStep(
        Recorder(), Recorder(), dlq, metrics, 100_000, decisions=TurnDecisions(100_000)
    )
    doc = json.loads(_pii().model_dump_json())
    del doc["answer"]  # invalid: schema
    doc["query"] = EMAIL  # pydantic's message would quote it
    step.submit(env(raw(json.dumps(doc).encode(), offset=1), offset=1))
    step.submit(env(raw(f"not json, call {EMAIL}".encode(), offset=2), offset=2))
    step.poll()
    text = sink.path.read_text()
    assert EMAIL not in text and "4111" not in text
    records = [json.loads(line) for line in text.splitlines()]
    assert [r["reason"] for r in records] == ["schema", "not_json"]
    value = decode_file_value(records[0])
    assert value is not None and json.loads(value)["query"] == "<EMAIL_1>"
    assert registry.get_sample_value("casewatch_redactions_total", {"kind": "email"}) == 2


def test_a_poison_value_too_large_to_redact_is_withheld(sink: FileDeadLetterSink) -> None:
    dlq = RedactingDeadLetterSink(
        sink, Redactor(RedactionPolicy(max_chars=50)), StreamRecorder(Metrics(CollectorRegistry()))
    )
    dlq.send(raw(f"{EMAIL} {'x' * 100}".encode(), offset=9), "not_json", "bad json")
    record = json.loads(sink.path.read_text())
    assert record["value"] == "" and record["reason"] == "not_json"
    assert record["detail"].startswith("value withheld: too large to redact")


def test_screening_decides_on_the_redacted_turn_as_the_sample_step_does() -> None:
    # Raw, the answer's e-mail is three edits from the customer's: beyond the tripwire's reach.
    # Redacted, it is another e-mail than the customer's: the tripwire trips, so screening
    # must hand the record on (None) rather than finish it as not sampled.
    raw = (
        make_turn(
            "s1",
            query="Reset MFA for k.lee@contoso.example please",
            contexts=[{"id": "kb-1", "text": "Run `acme-admin mfa reset --user <user>`."}],
            answer="Run `acme-admin mfa reset --user l.lef@contpso.example`.",
        )
        .model_dump_json()
        .encode()
    )
    sampling = SamplingConfig(default_rate=0.0)
    assert chain_decisions(sampling).finishes_unjudged(TP.topic, raw) == "helpdesk"
    assert chain_decisions(sampling, RedactionConfig()).finishes_unjudged(TP.topic, raw) is None
    off = chain_decisions(sampling, RedactionConfig(enabled=False))
    assert off.finishes_unjudged(TP.topic, raw) == "helpdesk"
