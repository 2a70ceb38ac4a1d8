"""End to end: personal data in a turn reaches no judge, no table, no dead letter.

A real daemon (Kafka source on the embedded Tansu broker, the OpenAI judge client against the
fake judge server, SQLite or PostgreSQL) consumes a turn full of personal data and a poison
record holding some too. Then the fake judge's received requests, every row of every table
(and, for SQLite, the database file's bytes), and the dead-letter topic are searched for the
raw values: none may be there; the placeholders are.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from consumers.dlq import KafkaDeadLetterQueue
from consumers.kafka_source import KafkaTurnSource
from consumers.tansu import EmbeddedBroker
from monitor.storage.audit import counts
from monitor.storage.store import Store
from tests.fake_judge_server import FakeJudgeServer
from tests.fixtures.broker import DLQ_SUFFIX, produce
from tests.fixtures.databases import make_turn
from tests.fixtures.judge_server import fake_judge_config
from tests.support.daemon import kafka_settings, running
from tests.support.kafka import committed_offset, read_topic
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

EMAIL = "Maria.Garcia@contoso-mail.com"
PHONE = "+44 7911 123456"
CARD = "4111 1111 1111 1111"
IBAN = "DE89 3704 0044 0532 0130 00"
API_KEY = "sk-proj-Zq8Xw2Lm4Np6Rt0Vb3Cd5Fg7Hj9Kk1Ss"
# Every spelling a leak could take: as written, compacted, lower case.
RAW = (
    EMAIL,
    EMAIL.lower(),
    "7911 123456",
    "7911123456",
    CARD,
    CARD.replace(" ", ""),
    IBAN,
    IBAN.replace(" ", ""),
    API_KEY,
    API_KEY[8:],
)


def _pii_turn_json() -> bytes:
    turn = make_turn(
        "pii-1",
        case={
            "subject": f"Refund to {CARD}",
            "description": f"Customer {EMAIL} ({PHONE}) was charged twice; IBAN {IBAN}.",
        },
        history=[{"role": "user", "content": f"My key {API_KEY} also stopped working."}],
        query=f"Was {CARD} refunded? Reply to {EMAIL}.",
        contexts=[{"id": "kb-1", "text": "Refunds go back to the card charged (KB-40213)."}],
        answer=f"Yes: {CARD} was refunded; a receipt went to {EMAIL}. Rotate {API_KEY}.",
        reference=f"Refund issued to {CARD}.",
        labels={"customer": EMAIL},
    )
    return turn.model_dump_json().encode()


def _poison() -> bytes:
    doc = json.loads(_pii_turn_json())
    del doc["answer"]  # a schema error, whose message quotes the input
    doc["query"] = f"{EMAIL} {CARD}"
    doc["event_id"] = "pii-poison"
    return json.dumps(doc).encode()


def _every_row(url: str) -> str:
    engine = sa.create_engine(url)
    try:
        meta = sa.MetaData()
        meta.reflect(engine)
        assert "turns" in meta.tables
        with engine.connect() as conn:
            return "\n".join(
                repr(tuple(row))
                for table in meta.sorted_tables
                for row in conn.execute(table.select())
            )
    finally:
        engine.dispose()


def _leaks(text: str) -> list[str]:
    return [raw for raw in RAW if raw in text]


def test_no_raw_personal_data_reaches_a_judge_a_table_or_the_dead_letter_topic(
    tansu_broker: EmbeddedBroker, kafka_topic: str, db_url: str
) -> None:
    bootstrap = tansu_broker.bootstrap
    values = [_pii_turn_json(), _poison()]
    produce(bootstrap, kafka_topic, values)
    store = Store(db_url)
    store.migrate()
    with FakeJudgeServer() as judge:
        settings = kafka_settings(
            bootstrap,
            kafka_topic,
            db_url,
            judges={"remote": fake_judge_config(judge)},
            judge="remote",
        )
        kafka = settings.kafka
        with running(settings, KafkaTurnSource(kafka), KafkaDeadLetterQueue(kafka), store) as h:
            wait_for(
                lambda: committed_offset(bootstrap, kafka.group_id, kafka_topic) == len(values),
                what="both records finished",
            )
            assert counts(store)["verdicts"] == 1
            for kind in ("email", "phone", "card", "iban", "secret"):
                assert h.sample("casewatch_redactions_total", {"kind": kind}) >= 1, kind
        bodies = [b.decode("utf-8") for b in judge.request_bodies]

    assert bodies, "the judge was never called"
    prompts = "\n".join(json.loads(b)["messages"][-1]["content"] for b in bodies)
    assert _leaks("\n".join(bodies)) == [] and _leaks(prompts) == []
    assert "EMAIL_1" in prompts and "CARD_1" in prompts and "IBAN_1" in prompts

    rows = _every_row(db_url)
    assert _leaks(rows) == []
    assert "<CARD_1>" in rows and "<EMAIL_1>" in rows
    if db_url.startswith("sqlite:///"):
        path = Path(db_url.removeprefix("sqlite:///"))
        data = b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
        assert _leaks(data.decode("utf-8", errors="replace")) == []

    dead = read_topic(bootstrap, f"{kafka_topic}{DLQ_SUFFIX}", 1)
    assert len(dead) == 1
    record = dead[0].value.decode() + "".join(v.decode() for _, v in dead[0].headers)
    assert _leaks(record) == []
    assert "<EMAIL_1>" in record
