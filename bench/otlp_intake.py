"""OpenTelemetry intake against casewatch's own turn event, on the same turns, in one run.

The real ``Daemon`` (poll → decode or assemble → redact → sample → look-up → judge → store →
commit) over an in-memory source (no broker: its I/O would drown the difference), judging
every turn with the offline heuristic judge and storing the verdicts in a temporary SQLite
file. The same N turns are fed twice: as casewatch turn events (one message each), and as
OTLP ``ExportTraceServiceRequest`` messages (protobuf, as the Collector's Kafka exporter
writes them), one trace per turn of three spans (an agent root span with the conversation id,
a retrieval span with the query and documents, a chat span with the messages), encoded by the
real OTLP encoder from spans the real SDK recorded. Runs interleave; reported: the median of
each, turns/s and spans/s, and the ratio of the OTLP intake's turn throughput to the native
format's (target >= 0.5).

Memory: the trace assembler alone (``consumers.otel.assembly``) holding 10,000 open traces of
three spans each (no root yet, as when every trace waits for its last message), then fed
20,000 more with the cap at 10,000: the peak (tracemalloc) must stay where the cap put it.

    .venv/bin/python bench/otlp_intake.py [--turns 400] [--repeat 3] [--open 10000]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import tracemalloc
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ is not an installed package

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from prometheus_client import CollectorRegistry  # noqa: E402

from bench.ingest import bench_settings, turn_bytes  # noqa: E402
from bench.pipeline_cost import _median, _MemorySource, _NoDeadLetters  # noqa: E402
from consumers.otel.assembly import TraceAssembler  # noqa: E402
from consumers.otel.otlp import decode_spans  # noqa: E402
from consumers.records import TopicPartition  # noqa: E402
from monitor.config.kafka import TopicConfig  # noqa: E402
from monitor.judging.evaluator import build_evaluator  # noqa: E402
from monitor.metrics.exporter import Metrics  # noqa: E402
from monitor.runtime.clock import SystemClock  # noqa: E402
from monitor.runtime.logs import configure_logging  # noqa: E402
from monitor.schema.turn import TurnEvent  # noqa: E402
from monitor.storage.store import Store  # noqa: E402
from monitor.stream.prepare import stream_sampler  # noqa: E402
from monitor.stream.runner import stream_daemon  # noqa: E402

TOPIC = "bench.turns"  # the in-memory source's topic (bench/pipeline_cost.py)
PARTITIONS = 2
SPANS_PER_TRACE = 3


def otlp_message(
    turn: TurnEvent, provider: TracerProvider, exporter: InMemorySpanExporter
) -> bytes:
    """One trace of three spans carrying ``turn``, encoded as the Collector's exporter does."""
    exporter.clear()
    tracer = provider.get_tracer("bench")
    with tracer.start_as_current_span("invoke_agent") as agent:
        agent.set_attribute("gen_ai.operation.name", "invoke_agent")
        agent.set_attribute("gen_ai.conversation.id", turn.conversation_id)
        agent.set_attribute("support.case.subject", turn.case.subject)
        agent.set_attribute("support.case.description", turn.case.description)
        with tracer.start_as_current_span("retrieval") as retrieval:
            retrieval.set_attribute("gen_ai.operation.name", "retrieval")
            retrieval.set_attribute("gen_ai.retrieval.query.text", turn.query)
            docs = [{"id": c.id, "score": c.score, "content": c.text} for c in turn.contexts]
            retrieval.set_attribute("gen_ai.retrieval.documents", json.dumps(docs))
        with tracer.start_as_current_span("chat") as chat:
            chat.set_attribute("gen_ai.operation.name", "chat")
            chat.set_attribute("gen_ai.request.model", turn.assistant.model)
            history = [
                {"role": m.role, "parts": [{"type": "text", "content": m.content}]}
                for m in turn.history
            ]
            user = {"role": "user", "parts": [{"type": "text", "content": turn.query}]}
            chat.set_attribute("gen_ai.input.messages", json.dumps([*history, user]))
            out = [{"role": "assistant", "parts": [{"type": "text", "content": turn.answer}]}]
            chat.set_attribute("gen_ai.output.messages", json.dumps(out))
    return bytes(encode_spans(exporter.get_finished_spans()).SerializeToString())


def records(values: list[bytes]) -> list[Any]:
    out = [
        SimpleNamespace(
            topic=TOPIC,
            partition=i % PARTITIONS,
            offset=i // PARTITIONS,
            value=value,
            key=None,
            headers=[],
            timestamp=1_700_000_000_000 + i,
        )
        for i, value in enumerate(values)
    ]
    return sorted(out, key=lambda r: (r.partition, r.offset))


def run_once(values: list[bytes], fmt: str, workdir: Path, n: int) -> float:
    """Seconds for the daemon to judge, store and commit every message of ``values``."""
    db = workdir / f"{fmt}-{time.monotonic_ns()}.db"
    settings = bench_settings(
        "localhost:9",
        db,
        sampling={"default_rate": 1.0, "budget_calls_per_hour": None},
        assembly={
            # Throughput, not latency: the settle time (assembly.settle_seconds) would add its
            # seconds once, at the end of a run of a few seconds.
            "settle_seconds": 0.0,
            "case_attributes": {
                "subject": ["support.case.subject"],
                "description": ["support.case.description"],
            },
        },
    )
    kafka = settings.kafka.model_copy(
        update={"topics": [TopicConfig.model_validate({"name": TOPIC, "format": fmt})]}
    )
    settings = settings.model_copy(update={"kafka": kafka})
    store = Store(f"sqlite:///{db}")
    store.migrate()
    source = _MemorySource(records(values))
    evaluator = build_evaluator(settings, concurrency=settings.daemon.concurrency)
    daemon = stream_daemon(
        settings,
        source,
        _NoDeadLetters(),
        store,
        evaluator,
        Metrics(CollectorRegistry()),
        stream_sampler(settings, SystemClock()),
        exit_when_idle=True,
    )
    start = time.perf_counter()
    daemon.run()
    elapsed = time.perf_counter() - start
    stored = store.transaction(write=False)
    with stored as conn:
        judged = conn.exec_driver_sql("SELECT count(*) FROM verdicts").scalar_one()
    daemon.close()
    evaluator.close()
    store.close()
    expected = {TopicPartition(TOPIC, p): len(values) // PARTITIONS for p in range(PARTITIONS)}
    if source.committed != expected or judged != n:
        raise SystemExit(f"{fmt}: judged {judged} of {n}, committed {source.committed}")
    return elapsed


def assembly_peak_mb(open_traces: int, fed: int, message: bytes) -> float:
    """Peak traced memory of an assembler capped at ``open_traces`` fed ``fed`` rootless
    traces (each the spans of ``message`` under a fresh trace id, the root left out)."""
    assembler = TraceAssembler(
        idle_seconds=1e9,
        max_traces=open_traces,
        max_spans=open_traces * SPANS_PER_TRACE,
        max_spans_per_trace=100,
    )
    tracemalloc.start()
    for i in range(fed):
        trace_id = f"{i + 1:032x}"
        # Decoded afresh: every trace holds its own attribute values, as from the wire.
        decoded = decode_spans(message, "otlp_proto", 1 << 20)
        spans = [replace(s, trace_id=trace_id) for s in decoded if not s.is_root]
        assembler.add(spans, ("p", i), float(i))
        assembler.complete(float(i))  # pushed-out traces leave, as the pipeline takes them
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    if assembler.open_traces != min(open_traces, fed):
        raise SystemExit(f"{assembler.open_traces} traces open, expected {open_traces}")
    return peak / 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--open", type=int, default=10_000, help="Open traces (the cap).")
    args = parser.parse_args(argv)
    configure_logging("warning")

    native = [turn_bytes(i, run="otlp-bench") for i in range(args.turns)]
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "bench-assistant"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otlp = [otlp_message(TurnEvent.model_validate_json(v), provider, exporter) for v in native]

    native_s: list[float] = []
    otlp_s: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for _ in range(args.repeat):
            native_s.append(run_once(native, "casewatch", work, args.turns))
            otlp_s.append(run_once(otlp, "otlp_proto", work, args.turns))
    m_native, m_otlp = _median(native_s), _median(otlp_s)
    at_cap = assembly_peak_mb(args.open, args.open, otlp[0])
    past_cap = assembly_peak_mb(args.open, 3 * args.open, otlp[0])
    result = {
        "turns": args.turns,
        "repeat": args.repeat,
        "native_turns_per_s": round(args.turns / m_native, 1),
        "otlp_turns_per_s": round(args.turns / m_otlp, 1),
        "otlp_spans_per_s": round(args.turns * SPANS_PER_TRACE / m_otlp, 1),
        "ratio_otlp_to_native": round(m_native / m_otlp, 3),
        "open_traces": args.open,
        "peak_mb_at_cap": round(at_cap, 1),
        "peak_mb_fed_3x_cap": round(past_cap, 1),
        "peak_ratio_3x_to_1x": round(past_cap / at_cap, 3),
    }
    print(
        f"native: {result['native_turns_per_s']} turns/s; OTLP: {result['otlp_turns_per_s']} "
        f"turns/s ({result['otlp_spans_per_s']} spans/s), ratio {result['ratio_otlp_to_native']} "
        f"(target >= 0.5), median of {args.repeat}"
    )
    print(
        f"assembler: {args.open} open traces peak {result['peak_mb_at_cap']} MB; fed "
        f"{3 * args.open} with the cap at {args.open}: {result['peak_mb_fed_3x_cap']} MB"
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
