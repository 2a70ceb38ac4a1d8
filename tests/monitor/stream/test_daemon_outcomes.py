"""Outcome events through the daemon on a real broker: feedback before its turn, after it,
duplicated, for unknown turns and malformed, beside a turns topic; joined counts and the judge
against the users computed here from what the store holds, independently of the product."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from consumers.dlq import HEADER_REASON, KafkaDeadLetterQueue
from consumers.kafka_source import KafkaTurnSource
from consumers.record_reader import KafkaRecordReader
from consumers.tansu import EmbeddedBroker, create_topics, delete_topics
from monitor.config.kafka import KafkaConfig
from monitor.config.settings import Settings, load_settings
from monitor.jobs.outcome_join import OutcomeJoinJob
from monitor.jobs.recorders import OutcomeRecorder
from monitor.schema.outcome import OutcomeEvent
from monitor.schema.turn import TurnEvent
from monitor.storage.audit import stored_verdicts
from monitor.storage.outcomes import OutcomeRecords
from monitor.storage.retained_turns import KeptTurn
from monitor.storage.store import Store
from monitor.storage.tables import retained_turns
from monitor.stream.pipeline import PipelineConfig, chain_decisions
from monitor.stream.reread import TurnReread
from tests.fixtures.broker import DLQ_SUFFIX, produce
from tests.fixtures.databases import make_turn
from tests.support.daemon import running
from tests.support.kafka import committed_offset, read_topic
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

ASSISTANT = "helpdesk"
N_TURNS = 8


@pytest.fixture
def topics(tansu_broker: EmbeddedBroker) -> Iterator[tuple[str, str]]:
    suffix = uuid.uuid4().hex[:12]
    turns, outcomes = f"test.turns.{suffix}", f"test.outcomes.{suffix}"
    create_topics(tansu_broker.bootstrap, [turns, outcomes], dlq_suffix=DLQ_SUFFIX)
    yield turns, outcomes
    delete_topics(
        tansu_broker.bootstrap,
        [turns, outcomes, f"{turns}{DLQ_SUFFIX}", f"{outcomes}{DLQ_SUFFIX}"],
    )


def settings_for(
    bootstrap: str, turns: str, outcomes: str, db_url: str, **overrides: Any
) -> Settings:
    kafka = KafkaConfig(
        bootstrap_servers=[bootstrap],
        topics=[turns, {"name": outcomes, "kind": "outcomes"}],  # type: ignore[list-item]
        group_id=f"casewatch-test-{uuid.uuid4().hex[:8]}",
        dlq_suffix=DLQ_SUFFIX,
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
        max_poll_interval_ms=6000,
        max_poll_records=50,
        broker_quirks="none",
    )
    return load_settings(None, kafka=kafka, storage={"url": db_url}, **overrides)


def feedback(outcome_id: str, turn: str, negative: bool) -> bytes:
    doc: dict[str, Any] = {
        "outcome_id": outcome_id,
        "kind": "feedback",
        "assistant": ASSISTANT,
        "timestamp": "2026-03-01T12:00:00Z",
        "turn_event_id": turn,
    }
    if negative:
        doc["thumbs"] = "down"
    else:
        doc["rating"] = {"value": 5, "scale_min": 1, "scale_max": 5}
    return json.dumps(doc).encode()


def turn_value(i: int) -> bytes:
    # Half the answers contradict their evidence, so the judge's bands vary.
    answer = "Reinstall the VPN driver (KB-1)." if i % 2 else "Disable the firewall (KB-9)."
    return make_turn(f"evt-{i}", answer=answer).model_dump_json().encode()


def test_feedback_before_after_duplicated_unknown_and_malformed(
    tansu_broker: EmbeddedBroker, topics: tuple[str, str], db_url: str
) -> None:
    bootstrap = tansu_broker.bootstrap
    turns_topic, outcomes_topic = topics
    settings = settings_for(bootstrap, turns_topic, outcomes_topic, db_url)
    group = settings.kafka.group_id
    store = Store(db_url)
    store.migrate()
    negative = {f"evt-{i}": i % 3 == 0 for i in range(N_TURNS)}
    before = [feedback(f"fb-{i}", f"evt-{i}", negative[f"evt-{i}"]) for i in range(4)]
    after = [feedback(f"fb-{i}", f"evt-{i}", negative[f"evt-{i}"]) for i in range(4, N_TURNS)]
    unknown = [feedback("fb-u1", "evt-unknown-1", True), feedback("fb-u2", "evt-unknown-2", False)]
    duplicates = [before[0], after[0], after[1]]
    bad = {
        b"{not json": "not_json",
        feedback("fb-x", "evt-1", True).replace(
            b'"thumbs": "down"', b'"rating": {"value": 11}'
        ): "out_of_scale",
        json.dumps(
            {
                "outcome_id": "fb-y",
                "kind": "feedback",
                "assistant": ASSISTANT,
                "timestamp": "2026-03-01T12:00:00Z",
                "thumbs": "down",
            }
        ).encode(): "schema",
    }
    source = KafkaTurnSource(settings.kafka)
    dlq = KafkaDeadLetterQueue(settings.kafka)
    with running(settings, source, dlq, store) as h:
        # Feedback on turns 0-3 arrives (and is stored) before any turn.
        first = [*before, *unknown, *bad]
        produce(bootstrap, outcomes_topic, first)
        wait_for(
            lambda: committed_offset(bootstrap, group, outcomes_topic) == len(first),
            what="the early feedback committed",
        )
        produce(bootstrap, turns_topic, [turn_value(i) for i in range(N_TURNS)])
        wait_for(
            lambda: committed_offset(bootstrap, group, turns_topic) == N_TURNS,
            what="the turns stored",
        )
        # Feedback on turns 4-7 after their turn, and three events sent twice.
        produce(bootstrap, outcomes_topic, [*after, *duplicates])
        total = len(first) + len(after) + len(duplicates)
        wait_for(
            lambda: committed_offset(bootstrap, group, outcomes_topic) == total,
            what="the late feedback committed",
        )
        # One pass of the join job (on the lease in the daemon; run here on the test's cue).
        OutcomeJoinJob(settings.outcomes, OutcomeRecords(store), OutcomeRecorder(h.metrics)).run()

        def joins(outcome: str) -> float:
            return h.sample("casewatch_outcome_joins_total", {"outcome": outcome})

        def events(outcome: str) -> float:
            return h.sample("casewatch_outcome_events_total", {"outcome": outcome})

        assert events("inserted") == len(before) + len(after) + len(unknown)
        assert events("duplicate") == len(duplicates)
        assert joins("on_arrival") == len(after)
        assert joins("later") == len(before)
        assert joins("expired") == 0
        assert h.sample("casewatch_outcomes_pending") == len(unknown)
        n_negative = sum(negative.values()) + 1  # + the unknown turn's thumbs down
        assert (
            h.sample(
                "casewatch_outcomes_total", {"assistant": ASSISTANT, "kind": "feedback_negative"}
            )
            == n_negative
        )
        assert (
            h.sample(
                "casewatch_outcomes_total", {"assistant": ASSISTANT, "kind": "feedback_positive"}
            )
            == N_TURNS + 2 - n_negative
        )
        for reason in bad.values():
            assert h.sample("casewatch_dead_letter_total", {"reason": reason}) == 1

        # The judge against the users, from the stored bands, counted here.
        bands = {row["event_id"]: row["turn_band"] for row in stored_verdicts(store, limit=100)}
        assert set(bands) == set(negative)
        expected: dict[str, int] = {}
        for event_id, unhappy in negative.items():
            flagged = bands[event_id] in ("severe", "moderate")
            name = {
                (True, True): "agree_unhappy",
                (True, False): "judge_blind",
                (False, True): "judge_harsh",
                (False, False): "agree_happy",
            }[(unhappy, flagged)]
            expected[name] = expected.get(name, 0) + 1
        for name in ("agree_unhappy", "judge_blind", "judge_harsh", "agree_happy"):
            got = h.sample(
                "casewatch_judge_user_pairs_total", {"assistant": ASSISTANT, "agreement": name}
            )
            assert got == expected.get(name, 0), (name, bands)

    letters = read_topic(bootstrap, f"{outcomes_topic}{DLQ_SUFFIX}", len(bad))
    reasons = sorted(dict(r.headers)[HEADER_REASON].decode() for r in letters)
    assert reasons == sorted(bad.values())


@pytest.mark.parametrize("keeper_process", [True, False], ids=["keeper_process", "writer_thread"])
def test_unsampled_turns_are_kept_redacted_for_their_feedback(
    tansu_broker: EmbeddedBroker, topics: tuple[str, str], db_url: str, keeper_process: bool
) -> None:
    """Every unsampled turn is kept, through the keeper's process or the daemon's writer
    thread: one redaction left as it came as its Kafka record's place (nothing of its text
    written; found by the outcome join once feedback asks for it), read back from the broker,
    decoded and redacted, as the turn itself; one redaction changed as its redacted JSON text.
    A malformed record is dead-lettered and never kept."""
    bootstrap = tansu_broker.bootstrap
    turns_topic, outcomes_topic = topics
    keeping = {"retain_unsampled": True, "retain_process": keeper_process}
    settings = settings_for(
        bootstrap, turns_topic, outcomes_topic, db_url, sampling={"default_rate": 0.0}
    )
    settings = settings.model_copy(
        update={"outcomes": settings.outcomes.model_copy(update=keeping)}
    )
    store = Store(db_url)
    store.migrate()
    # Half the turns hold an address to redact; the other half nothing (kept as they came).
    emails = {f"keep-{i}": f"customer{i}@example.com" for i in range(0, N_TURNS, 2)}
    clean = {f"keep-{i}": make_turn(f"keep-{i}") for i in range(1, N_TURNS, 2)}
    values = [
        make_turn(e, query=f"My VPN drops, write to {mail}").model_dump_json().encode()
        for e, mail in emails.items()
    ] + [turn.model_dump_json().encode() for turn in clean.values()]
    source = KafkaTurnSource(settings.kafka)
    dlq = KafkaDeadLetterQueue(settings.kafka)
    with running(settings, source, dlq, store) as h:
        produce(bootstrap, turns_topic, [*values, b"{not json"])
        wait_for(
            lambda: h.sample("casewatch_turns_retained_total", {"outcome": "stored"}) == N_TURNS,
            what="every unsampled turn kept",
        )
        assert h.sample("casewatch_turns_retained_total", {"outcome": "dropped"}) == 0
        assert h.sample("casewatch_turns_retained_total", {"outcome": "failed"}) == 0
    # Negative feedback on every kept turn: the join finds those kept as places.
    records = OutcomeRecords(store)
    records.save(
        [
            (
                OutcomeEvent.model_validate(
                    {
                        "outcome_id": f"fb-{event_id}",
                        "kind": "feedback",
                        "assistant": "helpdesk",
                        "timestamp": "2026-03-01T12:00:00Z",
                        "turn_event_id": event_id,
                        "thumbs": "down",
                    }
                ),
                None,
            )
            for event_id in [*emails, *clean]
        ]
    )
    assert records.join_pending(3600.0).joined == len(clean)  # the rows joined on arrival
    r = retained_turns.c
    query = sa.select(r.event_id, r.event, r.source_topic, r.source_partition, r.source_offset)
    with store.transaction(write=False) as conn:
        rows = {str(row.event_id): row for row in conn.execute(query)}
    assert set(rows) == set(emails) | set(clean)
    reread = TurnReread(
        KafkaRecordReader(settings.kafka), chain_decisions(PipelineConfig.from_settings(settings))
    )
    try:
        for event_id, row in rows.items():
            if event_id in clean:
                assert row.event == "" and row.source_topic == turns_topic
                kept = KeptTurn(
                    event_id, "", row.source_topic, row.source_partition, row.source_offset
                )
                assert reread(kept) == clean[event_id]  # read back from the broker
                continue
            assert row.source_topic is None
            turn = TurnEvent.model_validate_json(row.event)
            assert turn.event_id == event_id and turn.conversation_id == f"conv-{event_id}"
            assert emails[event_id] not in row.event  # redacted before it was kept
            assert turn.query.startswith("My VPN drops, write to ")
    finally:
        reread.close()
    store.close()
