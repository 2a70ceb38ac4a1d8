"""Traces split across partitions: how many are judged whole, half-built, or counted?

Starts the embedded Tansu broker and writes ``--traces`` GenAI traces (an agent root span with
the conversation id, a retrieval span with two documents, a chat span) to a two-partition
topic as the Collector's Kafka exporter does by default: unkeyed, each span of a trace on a
partition drawn at random (seeded), every trace on both partitions, the messages of both
partitions in a random order. Then, for each layout of the consumer group, a fresh group reads
the topic to its end (daemons in this process, heuristic judge, SQLite):

- ``1 replica``: one daemon reads both partitions;
- ``2 replicas``: two daemons of one group, one partition each;
- ``2 replicas + repartition``: the same with ``assembly.repartition`` (and its topic).

A trace is judged whole when its stored turn has its conversation id and both contexts,
half-built when its turn lacks either; counted when its parts were counted
(``trace_incomplete``, ``trace_not_keyed``, ``no_inference_span``, ``late_span``) and nothing
of it was judged.

    .venv/bin/python bench/split_traces.py              # 50 traces
    .venv/bin/python bench/split_traces.py --traces 200 --seed 7

Prints one line per layout, then one JSON line of results.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ is not an installed package

import sqlalchemy as sa  # noqa: E402

from consumers.dlq import KafkaDeadLetterQueue  # noqa: E402
from consumers.kafka_source import KafkaTurnSource  # noqa: E402
from consumers.otel.otlp import Span  # noqa: E402
from consumers.tansu import EmbeddedBroker, create_topics  # noqa: E402
from monitor.config.kafka import TopicConfig  # noqa: E402
from monitor.runtime.logs import configure_logging  # noqa: E402
from monitor.storage.store import Store  # noqa: E402
from tests.consumers.otel.otlp_messages import request_of  # noqa: E402
from tests.consumers.otel.spans import genai_trace  # noqa: E402
from tests.fixtures.broker import DLQ_SUFFIX, produce  # noqa: E402
from tests.support.daemon import Harness, kafka_settings, running  # noqa: E402
from tests.support.kafka import committed_offset  # noqa: E402

SUFFIX = ".casewatch-by-trace"
FRAGMENT_REASONS = ("trace_incomplete", "trace_not_keyed", "no_inference_span", "late_span")


def wait_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


def traces(n: int) -> list[list[Span]]:
    out = []
    for i in range(n):
        retrieval, chat, agent = genai_trace(trace_id=f"{i + 1:032x}")
        attrs = {**agent.attributes, "gen_ai.conversation.id": f"conv-{i}"}
        out.append([replace(agent, attributes=attrs), retrieval, chat])
    return out


def split(all_traces: list[list[Span]], rng: random.Random) -> list[tuple[int, bytes]]:
    """(partition, message) in the order produced: each trace's spans over both partitions."""
    messages: list[tuple[int, bytes]] = []
    for spans in all_traces:
        while True:
            where = [rng.randrange(2) for _ in spans]
            if len(set(where)) == 2:
                break
        for p in (0, 1):
            messages.append(
                (p, request_of([s for s, w in zip(spans, where, strict=True) if w == p]))
            )
    rng.shuffle(messages)
    return messages


def _assigned(h: Harness) -> set[tuple[str, str]]:
    return {
        (s.labels["topic"], s.labels["partition"])
        for family in h.registry.collect()
        if family.name == "casewatch_consumer_lag"
        for s in family.samples
    }


def run_layout(
    bootstrap: str,
    messages: list[tuple[int, bytes]],
    replicas: int,
    repartition: bool,
    n: int,
    workdir: Path,
) -> dict[str, Any]:
    topic = f"bench.split.{uuid.uuid4().hex[:8]}"
    create_topics(bootstrap, [topic, f"{topic}{SUFFIX}"], partitions=2, dlq_suffix=DLQ_SUFFIX)
    url = f"sqlite:///{workdir / f'{uuid.uuid4().hex[:8]}.db'}"
    Store(url).migrate()
    base = kafka_settings(bootstrap, topic, url)
    kafka = base.kafka.model_copy(
        update={"topics": [TopicConfig(name=topic, format="otlp_proto")], "fetch_max_wait_ms": 50}
    )
    settings = kafka_settings(
        bootstrap,
        topic,
        url,
        kafka=kafka,
        assembly={
            "idle_seconds": 5.0,
            "repartition": repartition,
            "repartition_suffix": SUFFIX,
        },
        sampling={"default_rate": 1.0, "budget_calls_per_hour": None, "budget_usd_per_hour": None},
    )
    topics = settings.kafka.topic_names
    group = settings.kafka.group_id
    harnesses: list[Harness] = []
    with ExitStack() as stack:
        for _ in range(replicas):
            source = KafkaTurnSource(settings.kafka)
            store = Store(url)
            harnesses.append(
                stack.enter_context(
                    running(settings, source, KafkaDeadLetterQueue(settings.kafka), store)
                )
            )

        every = {(t, str(p)) for t in topics for p in (0, 1)}
        wait_until(
            lambda: (
                set().union(*(_assigned(h) for h in harnesses)) == every
                and all({t for t, _ in _assigned(h)} == set(topics) for h in harnesses)
            ),
            120,
            "the group's partitions spread over its replicas",
        )
        # Written once every replica has its partitions: none reads the other's share first.
        for p, value in messages:
            produce(bootstrap, topic, [value], partition=p)

        def committed(t: str) -> int:
            return sum(committed_offset(bootstrap, group, t, p) or 0 for p in (0, 1))

        wait_until(lambda: committed(topic) == 2 * n, 300, f"{topic} read to its end")
        if repartition:
            wait_until(lambda: committed(topics[1]) == 2 * n, 300, "the repartition topic read")
        counted_by_reason = {
            r: sum(
                h.sample("casewatch_turns_skipped_total", {"assistant": "support-bot", "reason": r})
                for h in harnesses
            )
            for r in FRAGMENT_REASONS
        }
    store = Store(url)
    with store.transaction(write=False) as conn:
        rows = conn.execute(sa.text("SELECT trace_id, event FROM turns")).all()
    store.close()
    judged: dict[str, list[dict[str, Any]]] = {}
    for trace_id, event in rows:
        judged.setdefault(trace_id, []).append(
            json.loads(event) if isinstance(event, str) else event
        )
    whole = half = 0
    for trace_id, docs in judged.items():
        i = int(trace_id, 16) - 1
        for doc in docs:
            ok = doc["conversation_id"] == f"conv-{i}" and len(doc["contexts"]) == 2
            whole += ok
            half += not ok
    return {
        "layout": f"{replicas} replica{'s' if replicas > 1 else ''}"
        + (" + repartition" if repartition else ""),
        "traces": n,
        "judged_whole": whole,
        "judged_half_built": half,
        "judged_twice": sum(1 for docs in judged.values() if len(docs) > 1),
        "counted_not_judged": n - len(judged),
        "counted_by_reason": counted_by_reason,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", type=int, default=50)
    parser.add_argument("--seed", type=int, default=41)
    args = parser.parse_args()
    configure_logging("warning", json=False)
    rng = random.Random(args.seed)
    messages = split(traces(args.traces), rng)
    results = []
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker() as broker:
        for replicas, repartition in ((1, False), (2, False), (2, True)):
            result = run_layout(
                broker.bootstrap, messages, replicas, repartition, args.traces, Path(tmp)
            )
            results.append(result)
            print(
                f"{result['layout']:<26} whole {result['judged_whole']:>4}  "
                f"half-built {result['judged_half_built']:>4}  "
                f"counted, not judged {result['counted_not_judged']:>4}  "
                f"{result['counted_by_reason']}",
                flush=True,
            )
    print(json.dumps({"seed": args.seed, "results": results}))


if __name__ == "__main__":
    main()
