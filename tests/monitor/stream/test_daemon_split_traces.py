"""End to end on a real broker: OTLP traces whose spans the Collector's Kafka exporter wrote
unkeyed (its default), so each trace is split over the two partitions of its topic, the root
first for half of them and last for the others.

- one replica reads both partitions: every trace is judged once, whole (its contexts, its
  conversation id), none counted as a fragment;
- two replicas in one group with ``assembly.repartition``: each re-publishes what it reads keyed
  by trace id to the repartition topic, which the group reads too: every trace is judged once,
  whole;
- two replicas without it: no trace is judged half-built (each part is counted as
  ``trace_incomplete`` or ``trace_not_keyed``), and the operator is told so.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from consumers.dlq import KafkaDeadLetterQueue
from consumers.kafka_source import KafkaTurnSource
from consumers.otel.otlp import Span
from consumers.tansu import create_topics
from monitor.config.kafka import TopicConfig
from monitor.config.settings import Settings
from monitor.storage.store import Store
from tests.consumers.otel.otlp_messages import request_of
from tests.consumers.otel.spans import genai_trace
from tests.fixtures.broker import DLQ_SUFFIX, ContractBroker, produce
from tests.support.daemon import Harness, kafka_settings, rows_per_event, running
from tests.support.kafka import committed_offset
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

TRACES = 8
SUFFIX = ".casewatch-by-trace"
# Long enough for the test to produce the second halves after the first were read.
ASSEMBLY = {"settle_seconds": 10.0, "idle_seconds": 30.0, "repartition_suffix": SUFFIX}
FRAGMENTS = (
    "trace_incomplete",
    "trace_not_keyed",
    "late_span",
    "no_inference_span",
    "no_genai_span",
)


def _trace(n: int) -> tuple[list[Span], list[Span]]:
    """Trace ``n`` as the two partitions carry it, its conversation ``conv-n``: the root with
    the retrieval span and the chat span apart, or (every other pair) the root with the chat
    span and the retrieval span apart. The root's part looks whole where it is read."""
    retrieval, chat, agent = genai_trace(trace_id=f"{n + 1:032x}")
    attrs = {**agent.attributes, "gen_ai.conversation.id": f"conv-{n}"}
    root = replace(agent, attributes=attrs)
    if n % 4 < 2:
        return [root, retrieval], [chat]
    return [root, chat], [retrieval]


def _halves(first: bool) -> tuple[list[bytes], list[bytes]]:
    """The messages of partition 0 and 1 in the first (``first``) or second round: even traces
    send their root part first, odd ones their chat part first."""
    p0: list[bytes] = []
    p1: list[bytes] = []
    for n in range(TRACES):
        rooted, apart = _trace(n)
        root_now = (n % 2 == 0) == first
        if root_now:
            p0.append(request_of(rooted))
        else:
            p1.append(request_of(apart))
    return p0, p1


def _settings(broker: ContractBroker, topic: str, url: str, **assembly: Any) -> Settings:
    base = kafka_settings(broker.bootstrap, topic, url)
    kafka = base.kafka.model_copy(update={"topics": [TopicConfig(name=topic, format="otlp_proto")]})
    return kafka_settings(
        broker.bootstrap,
        topic,
        url,
        kafka=kafka,
        assembly={**ASSEMBLY, **assembly},
        sampling={"default_rate": 1.0, "budget_calls_per_hour": None, "budget_usd_per_hour": None},
    )


def _judged(store: Store) -> dict[str, dict[str, Any]]:
    with store.transaction(write=False) as conn:
        rows = conn.execute(sa.text("SELECT event FROM turns")).all()
    docs = [json.loads(e) if isinstance(e, str) else e for (e,) in rows]
    return {d["conversation_id"]: d for d in docs}


def _assigned(registry: CollectorRegistry) -> set[tuple[str, str]]:
    return {
        (s.labels["topic"], s.labels["partition"])
        for family in registry.collect()
        if family.name == "casewatch_consumer_lag"
        for s in family.samples
    }


def _produce_in_two_rounds(broker: ContractBroker, topic: str, consumed: Any) -> None:
    """Round one, then round two once round one has been read (the halves meet in the
    assembler after one of them waited)."""
    for first in (True, False):
        p0, p1 = _halves(first)
        target = consumed() + len(p0) + len(p1)
        produce(broker.bootstrap, topic, p0, partition=0)
        produce(broker.bootstrap, topic, p1, partition=1)
        wait_for(
            lambda t=target: consumed() >= t,
            what=f"round {'one' if first else 'two'} read",
        )


def _every_trace_whole_once(store: Store) -> None:
    assert sorted(rows_per_event(store).values()) == [1] * TRACES
    judged = _judged(store)
    assert set(judged) == {f"conv-{n}" for n in range(TRACES)}
    for doc in judged.values():
        assert [c["id"] for c in doc["contexts"]] == ["kb-1", "kb-2"]


def _counted(harnesses: list[Harness], reason: str) -> float:
    labels = {"assistant": "support-bot", "reason": reason}
    return sum(h.sample("casewatch_turns_skipped_total", labels) for h in harnesses)


def test_one_replica_judges_every_split_trace_whole_once(
    kafka_broker: ContractBroker, tmp_path: Path
) -> None:
    topic = f"test.split.{uuid.uuid4().hex[:8]}"
    create_topics(kafka_broker.bootstrap, [topic], partitions=2, dlq_suffix=DLQ_SUFFIX)
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    store = Store(url)
    store.migrate()
    settings = _settings(kafka_broker, topic, url)
    source = KafkaTurnSource(settings.kafka)
    with running(settings, source, KafkaDeadLetterQueue(settings.kafka), store) as h:

        def consumed() -> float:
            return h.sample("casewatch_turns_consumed_total", {"topic": topic})

        _produce_in_two_rounds(kafka_broker, topic, consumed)
        wait_for(
            lambda: all(
                committed_offset(kafka_broker.bootstrap, settings.kafka.group_id, topic, p)
                == TRACES
                for p in (0, 1)
            ),
            what="every message finished and committed",
        )
        counted = {reason: _counted([h], reason) for reason in FRAGMENTS}
    assert counted == dict.fromkeys(FRAGMENTS, 0.0)
    _every_trace_whole_once(store)


@pytest.mark.parametrize("repartition", [True, False])
def test_two_replicas_judge_no_trace_half_built(
    kafka_broker: ContractBroker, tmp_path: Path, repartition: bool
) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = f"test.split.{uuid.uuid4().hex[:8]}"
    topics = [topic, f"{topic}{SUFFIX}"] if repartition else [topic]
    create_topics(bootstrap, topics, partitions=2, dlq_suffix=DLQ_SUFFIX)
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    Store(url).migrate()
    settings = _settings(kafka_broker, topic, url, repartition=repartition)
    assert settings.kafka.topic_names == topics
    store_a, store_b = Store(url), Store(url)
    src_a, src_b = KafkaTurnSource(settings.kafka), KafkaTurnSource(settings.kafka)
    with (
        running(settings, src_a, KafkaDeadLetterQueue(settings.kafka), store_a) as a,
        running(settings, src_b, KafkaDeadLetterQueue(settings.kafka), store_b) as b,
    ):
        every = {(t, str(p)) for t in topics for p in (0, 1)}
        wait_for(
            lambda: (
                _assigned(a.registry) | _assigned(b.registry) == every
                and {t for t, _ in _assigned(a.registry)} == set(topics)
                and {t for t, _ in _assigned(b.registry)} == set(topics)
            ),
            what="each replica owns one partition of each topic",
        )

        def consumed() -> float:
            labels = {"topic": topic}
            return a.sample("casewatch_turns_consumed_total", labels) + b.sample(
                "casewatch_turns_consumed_total", labels
            )

        _produce_in_two_rounds(kafka_broker, topic, consumed)
        group = settings.kafka.group_id

        def committed(t: str) -> int:
            return sum(committed_offset(bootstrap, group, t, p) or 0 for p in (0, 1))

        # Every source message (TRACES a partition), and every part re-published from them.
        wait_for(
            lambda: all(committed(t) == 2 * TRACES for t in topics),
            what="every message of every topic finished and committed",
        )
        counted = {reason: _counted([a, b], reason) for reason in FRAGMENTS}
        repartitioned = a.sample(
            "casewatch_spans_repartitioned_total", {"outcome": "sent"}
        ) + b.sample("casewatch_spans_repartitioned_total", {"outcome": "sent"})
    if repartition:
        assert repartitioned == 2 * TRACES  # one part per source message
        assert counted == dict.fromkeys(FRAGMENTS, 0.0)
        _every_trace_whole_once(store_a)
    else:
        # Each replica holds one part of every trace: the other part has no parent there
        # (trace_incomplete); the root's part looks whole, but its messages are not keyed by
        # trace id and the other partition is read elsewhere (trace_not_keyed). Half of those
        # would have been judged without their contexts. Nothing is judged, all is counted.
        assert rows_per_event(store_a) == {}
        assert counted["trace_incomplete"] == TRACES
        assert counted["trace_not_keyed"] == TRACES
        assert counted["no_inference_span"] == 0 and counted["no_genai_span"] == 0


def test_a_repartition_topic_smaller_than_its_source_is_warned_about(
    kafka_broker: ContractBroker, tmp_path: Path
) -> None:
    topic = f"test.split.{uuid.uuid4().hex[:8]}"
    create_topics(kafka_broker.bootstrap, [topic], partitions=2, dlq_suffix=DLQ_SUFFIX)
    create_topics(kafka_broker.bootstrap, [f"{topic}{SUFFIX}"], partitions=1, dlq_suffix=DLQ_SUFFIX)
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    store = Store(url)
    store.migrate()
    settings = _settings(kafka_broker, topic, url, repartition=True)
    with capture_logs() as logs:
        source = KafkaTurnSource(settings.kafka)
        with running(settings, source, KafkaDeadLetterQueue(settings.kafka), store):

            def warned() -> list[Any]:
                return [
                    e
                    for e in logs
                    if e["event"] == "repartition topic missing or smaller than its source"
                ]

            wait_for(lambda: len(warned()) == 1, what="the smaller repartition topic warned about")
    (warning,) = warned()
    assert (warning["partitions"], warning["source_partitions"]) == (1, 2)
