"""CPU the daemon burns while every turn it read waits on a slow judge, in every source mode.

``casewatch run`` (a process of its own, as a user starts it) reads a few turns and sends each
to a judge that does not answer for minutes (the fake OpenAI-compatible server of
``tests/fake_judge_server.py``, in this process, holding every request). Once the judge holds
every turn, the daemon has nothing to do but wait: its CPU seconds (user + system, all
threads, ``psutil``) over a window of wall seconds are measured. The sources:

- ``file``: ``--file turns.jsonl`` (read to its end, not followed);
- ``follow``: ``--file turns.jsonl --follow``;
- ``stdin``: ``--file -``, the turns piped in and the pipe closed;
- ``otlp_file``: ``--file traces.jsonl --format otlp_json`` (one trace of three spans a turn);
- ``kafka``: a topic of the embedded Tansu broker (casewatch turn events);
- ``otlp_kafka``: a topic of OTLP protobuf trace batches (as the Collector's exporter writes);
- ``kafka_idle`` (the baseline): the same daemon on an empty topic, nothing to judge: what its
  background threads (probe server, jobs, consumer heartbeats) cost anyway.

With more turns than judge calls at once (``--turns 400``: 8 calls at the judge, the other
turns queued in the steps up to ``daemon.max_in_flight`` and the rest held back by
backpressure) the same is measured with the pipeline full.

Target: <= 0.02 CPU s per wall s in every mode (a loop that polls a file read to its end again
at once spins a core: 0.999 before the loop slept on the judge). Reported: the median of
``--runs`` runs of each mode, each run a fresh process.

    .venv/bin/python bench/idle_cpu.py [--turns 3] [--window 5] [--runs 3] [--modes file,kafka]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ is not an installed package

import psutil  # noqa: E402
import yaml  # noqa: E402
from google.protobuf import json_format  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from bench.ingest import BENCH_SAMPLING, DLQ_SUFFIX, FAST_GROUP, turn_bytes  # noqa: E402
from bench.otlp_intake import otlp_message  # noqa: E402
from consumers._kafka import KafkaProducer  # noqa: E402
from consumers.tansu import EmbeddedBroker, create_topics, free_port  # noqa: E402
from monitor.schema.turn import TurnEvent  # noqa: E402
from tests.fake_judge_server import FakeJudgeServer  # noqa: E402

TARGET = 0.02
MODES = ("file", "follow", "stdin", "otlp_file", "kafka", "otlp_kafka", "kafka_idle")
JUDGE_HOLD_S = 3600.0  # the judge answers nothing within a run
CONCURRENCY = 8  # judge calls at once (the default): more turns wait in the daemon, held
START_TIMEOUT_S = 90.0
JUDGE_KEY_ENV = "CASEWATCH_BENCH_JUDGE_KEY"  # the fake judge takes any key
JOIN_S = 5.0  # kafka_idle: what the group join and the jobs' first runs take, not measured


def _casewatch() -> list[str]:
    script = Path(sys.executable).with_name("casewatch")
    return [str(script)] if script.exists() else [sys.executable, "-m", "monitor.cli"]


def _otlp_json(proto: bytes) -> bytes:
    """An ``otlp_proto`` message as OTLP/JSON (ids as hex, as the Collector writes them)."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(proto)
    doc: dict[str, Any] = json_format.MessageToDict(request)
    for resource_spans in doc.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(doc).encode()


def _otlp_messages(turns: list[bytes]) -> list[bytes]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "bench-assistant"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return [otlp_message(TurnEvent.model_validate_json(t), provider, exporter) for t in turns]


def _config(workdir: Path, judge: FakeJudgeServer, kafka: dict[str, Any] | None) -> Path:
    """``casewatch run``'s settings: every turn judged, by a judge that holds each request."""
    doc: dict[str, Any] = {
        "storage": {"url": f"sqlite:///{workdir / f'{uuid.uuid4().hex[:8]}.db'}"},
        "server": {"port": free_port()},
        "sampling": BENCH_SAMPLING,
        "judges": {
            "slow": {
                "kind": "openai",
                "base_url": judge.base_url,
                "model": "fake-judge",
                "api_key_env": JUDGE_KEY_ENV,
                "timeout_seconds": JUDGE_HOLD_S,
                "transport_retries": 0,
            }
        },
        "judge": "slow",
        "daemon": {"concurrency": CONCURRENCY, "drain_timeout_seconds": 1},
    }
    if kafka is not None:
        doc["kafka"] = kafka
    path = workdir / f"config-{uuid.uuid4().hex[:8]}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _wait(
    cond: Callable[[], bool],
    timeout_s: float,
    what: str,
    proc: subprocess.Popen[bytes],
    log: Path,
) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise SystemExit(f"casewatch run exited ({proc.returncode}) before {what}:\n{tail}")
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)


def _cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


@contextmanager
def _daemon(
    args: list[str], log: IO[bytes], stdin: bytes | None
) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        [*_casewatch(), "run", *args],
        env={**os.environ, JUDGE_KEY_ENV: "bench-key"},
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        if stdin is not None and proc.stdin is not None:
            proc.stdin.write(stdin)
            proc.stdin.close()  # the end of the input: the source runs out once it is read
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _kafka_args(
    workdir: Path, judge: FakeJudgeServer, broker: EmbeddedBroker, values: list[bytes], fmt: str
) -> list[str]:
    topic = f"bench.idle.{uuid.uuid4().hex[:8]}"
    create_topics(broker.bootstrap, [topic], 1, dlq_suffix=DLQ_SUFFIX)
    if values:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1)
        for value in values:
            producer.send(topic, value=value)
        producer.flush(timeout=60)
        producer.close(timeout=10)
    kafka = {
        "bootstrap_servers": [broker.bootstrap],
        "topics": [topic if fmt == "casewatch" else {"name": topic, "format": fmt}],
        "group_id": f"bench-{uuid.uuid4().hex[:8]}",
        "dlq_suffix": DLQ_SUFFIX,
        **FAST_GROUP,
    }
    return ["--config", str(_config(workdir, judge, kafka))]


def measure(
    mode: str,
    workdir: Path,
    judge: FakeJudgeServer,
    broker: EmbeddedBroker | None,
    turns: list[bytes],
    window_s: float,
) -> float:
    """CPU seconds per wall second of one ``casewatch run`` in ``mode`` while the judge holds
    every turn it read (``kafka_idle``: while it has nothing to read)."""
    judge.reset()
    otlp = mode.startswith("otlp")
    values = _otlp_messages(turns) if otlp else turns
    stdin: bytes | None = None
    if mode in ("kafka", "otlp_kafka", "kafka_idle"):
        assert broker is not None
        expected = 0 if mode == "kafka_idle" else min(len(turns), CONCURRENCY)
        fmt = "otlp_proto" if otlp else "casewatch"
        args = _kafka_args(workdir, judge, broker, values if expected else [], fmt)
    else:
        expected = min(len(turns), CONCURRENCY)
        body = b"".join((_otlp_json(v) if otlp else v) + b"\n" for v in values)
        args = ["--config", str(_config(workdir, judge, None))]
        if mode == "stdin":
            args += ["--file", "-"]
            stdin = body
        else:
            data = workdir / f"{mode}-{uuid.uuid4().hex[:6]}.jsonl"
            data.write_bytes(body)
            args += ["--file", str(data)]
        if mode == "follow":
            args.append("--follow")
        if otlp:
            args += ["--format", "otlp_json"]
    log_path = workdir / f"{mode}-{uuid.uuid4().hex[:6]}.log"
    with log_path.open("wb") as log, _daemon(args, log, stdin) as proc:
        process = psutil.Process(proc.pid)
        if expected:
            _wait(
                lambda: judge.request_count >= expected,
                START_TIMEOUT_S,
                "every turn at the judge",
                proc,
                log_path,
            )
        else:
            _wait(
                lambda: b"daemon started" in log_path.read_bytes(),
                START_TIMEOUT_S,
                "the daemon's loop",
                proc,
                log_path,
            )
            time.sleep(JOIN_S)  # the group join and the jobs' first runs are not idling
        cpu0, wall0 = _cpu_s(process), time.monotonic()
        time.sleep(window_s)
        cpu1, wall1 = _cpu_s(process), time.monotonic()
        if proc.poll() is not None:
            raise SystemExit(f"{mode}: casewatch run exited during the window")
        if judge.request_count != expected:
            raise SystemExit(f"{mode}: {judge.request_count} judge requests, not {expected}")
    return (cpu1 - cpu0) / (wall1 - wall0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--window", type=float, default=5.0, help="Wall seconds measured.")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes: {sorted(unknown)} (known: {', '.join(MODES)})")
    turns = [turn_bytes(i, run=f"idle-{uuid.uuid4().hex[:6]}") for i in range(args.turns)]
    ratios: dict[str, list[float]] = {m: [] for m in modes}
    needs_broker = any(m in ("kafka", "otlp_kafka", "kafka_idle") for m in modes)
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeJudgeServer(latency=JUDGE_HOLD_S, record=False) as judge,
        EmbeddedBroker() if needs_broker else nullcontext() as broker,
    ):
        for run in range(args.runs):
            for mode in modes:  # interleaved: a busy moment of the machine hits every mode
                ratio = measure(mode, Path(tmp), judge, broker, turns, args.window)
                ratios[mode].append(ratio)
                print(f"run {run + 1} {mode:11s} {ratio:.4f} CPU s / wall s", flush=True)
    medians = {m: round(statistics.median(r), 4) for m, r in ratios.items()}
    print()
    print(f"{'mode':11s} median of {args.runs}  (CPU s per wall s; target <= {TARGET})")
    for mode, median in medians.items():
        print(f"{mode:11s} {median:.4f}  {'ok' if median <= TARGET else 'OVER'}")
    judged_modes = [m for m in modes if m != "kafka_idle"]
    result = {
        "turns": args.turns,
        "window_s": args.window,
        "runs": args.runs,
        "cpu_s_per_wall_s": medians,
        "runs_cpu_s_per_wall_s": {m: [round(x, 4) for x in r] for m, r in ratios.items()},
        "worst_mode": max(judged_modes, key=lambda m: medians[m]) if judged_modes else None,
        "target": TARGET,
        "meets_target": all(medians[m] <= TARGET for m in judged_modes),
        "load_average": os.getloadavg()[0],
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
