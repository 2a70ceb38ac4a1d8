"""Ingest throughput: casewatch's consume → decode → validate → sample path against a plain
kafka-python consumer reading the same topic, in the same run.

Starts its own Tansu broker, produces ``--messages`` valid ~1 KB turn events (two producer
processes), then alternates, ``--rounds`` times, between
- the baseline: a bare ``KafkaConsumer`` in a fresh group that polls the topic to its end and
  does nothing with the records;
- casewatch: the real daemon (``KafkaTurnSource`` → decode + validate → sample → offset
  commit, the code ``casewatch run`` runs) with sampling rate 0, so every turn is decoded,
  validated, checked by the identifier tripwire and sampled out and nothing is judged; done
  when every turn is counted skipped;
- casewatch with ``daemon.screen_processes: 1``: the same, with validation and the tripwire of
  the turns that are not judged moved to a screening process (monitor/stream/steps/screen.py).
Rates are steady-state: from the first delivered batch to the last record, so the consumer
group join (~3 s on Tansu) is excluded. Each round runs the three back to back, and each
casewatch figure is a ratio to that round's plain consumer; reported is the median ratio over
the rounds. The target is >= 0.9 (issue 12).

    .venv/bin/python bench/ingest.py [--messages 50000] [--rounds 2]

Prints a readable report, then one JSON line of results. The helpers above ``main`` (broker,
bulk producing, settings) are shared with bench/judging.py and bench/memory.py.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ and tests/ are not installed packages

from consumers._kafka import KafkaConsumer, KafkaProducer  # noqa: E402
from consumers.tansu import EmbeddedBroker, create_topics  # noqa: E402
from monitor.logs import configure_logging  # noqa: E402
from monitor.settings import Settings, load_settings  # noqa: E402

TOPIC = "bench.turns"
DLQ_SUFFIX = ".dlq"
# Fast group joins on a one-consumer group (see DESIGN.md: ~3 s instead of ~23 s).
FAST_GROUP = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000}
MAX_POLL_RECORDS = 500
_FILLER = "Restart the agent, then check the catalog lock and the media server log. "


# ---------------------------------------------------------------- shared helpers


def crc32c_impl() -> str:
    """Which CRC-32C kafka-python verifies fetched batches with: the optional C extension
    (PyPI ``crc32c``) or its pure-Python fallback (~0.1 s per MB, which dominates a plain
    consumer's CPU time). Benchmark figures depend on it; every bench reports it."""
    return "c" if importlib.util.find_spec("crc32c") is not None else "python"


def turn_bytes(i: int, size: int = 1000, run: str = "bench") -> bytes:
    """A valid turn event of about ``size`` bytes; ids unique per ``i``."""
    doc: dict[str, Any] = {
        "event_id": f"{run}-{i}",
        "conversation_id": f"{run}-conv-{i}",
        "turn_index": 0,
        "timestamp": "2026-11-02T09:06:00Z",
        "assistant": {"name": "bench-assistant", "version": "1.0", "model": "gpt-x"},
        "case": {"subject": "Backup fails with E4021", "description": "Full backup aborts."},
        "history": [{"role": "user", "content": "Hi, backups fail since the upgrade."}],
        "query": "Nightly full backup fails with E4021 after upgrading. What should I do?",
        "contexts": [{"id": "kb-1042#1", "text": "", "score": 0.9}],
        "answer": "Release the stale catalog lock with `backupctl catalog unlock --force`.",
        "labels": {"channel": "chat"},
    }
    room = max(0, size - len(json.dumps(doc)))
    doc["contexts"][0]["text"] = (_FILLER * (room // len(_FILLER) + 1))[:room]
    return json.dumps(doc).encode()


def _produce_part(
    bootstrap: str, topic: str, start: int, stop: int, size: int, run: str, partitions: int
) -> None:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks=1,
        linger_ms=50,
        batch_size=1 << 20,
        max_request_size=8 << 20,
    )
    for i in range(start, stop):
        producer.send(topic, value=turn_bytes(i, size, run), partition=i % partitions)
    producer.flush(timeout=120)
    producer.close(timeout=10)


def fill_topic(
    bootstrap: str,
    topic: str,
    n: int,
    *,
    partitions: int,
    size: int = 1000,
    processes: int = 2,
    run: str = "bench",
) -> float:
    """Produce ``n`` turn events from ``processes`` processes (one Python producer tops out
    near 6-7k msgs/s on the GIL); returns msgs/s."""
    ctx = multiprocessing.get_context("fork")
    bounds = [n * k // processes for k in range(processes + 1)]
    started = time.perf_counter()
    procs = [
        ctx.Process(
            target=_produce_part,
            args=(bootstrap, topic, bounds[k], bounds[k + 1], size, run, partitions),
        )
        for k in range(processes)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"a producer process failed (exit code {p.exitcode})")
    return n / (time.perf_counter() - started)


@contextmanager
def broker_with_topic(partitions: int, topic: str = TOPIC) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as broker:
        create_topics(broker.bootstrap, [topic], partitions, dlq_suffix=DLQ_SUFFIX)
        yield broker


def kafka_section(bootstrap: str, topic: str = TOPIC, group: str | None = None) -> dict[str, Any]:
    """The ``kafka`` settings of a bench daemon: the bench broker and a fresh group."""
    return {
        "bootstrap_servers": [bootstrap],
        "topics": [topic],
        "group_id": group or f"bench-{uuid.uuid4().hex[:8]}",
        "dlq_suffix": DLQ_SUFFIX,
        "max_poll_records": MAX_POLL_RECORDS,
        "max_poll_interval_ms": 10000,
        **FAST_GROUP,
    }


def bench_settings(bootstrap: str, db_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "kafka": kafka_section(bootstrap),
        "storage": {"url": f"sqlite:///{db_path}", "retention_days": None},
        "server": {"port": 0},
        "log_level": "warning",
    }
    values.update(overrides)
    return load_settings(None, **values)


def wait_until(
    cond: Callable[[], bool], timeout_s: float, what: str, interval_s: float = 0.05
) -> float:
    """Poll ``cond`` until true; returns the time.perf_counter() it was first seen true."""
    deadline = time.perf_counter() + timeout_s
    while not cond():
        if time.perf_counter() > deadline:
            raise SystemExit(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(interval_s)
    return time.perf_counter()


# ---------------------------------------------------------------- the two contenders


def plain_consumer(bootstrap: str, n: int, timeout_s: float) -> dict[str, float]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=f"plain-{uuid.uuid4().hex[:8]}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=MAX_POLL_RECORDS,
        max_poll_interval_ms=10000,
        **FAST_GROUP,
    )
    consumer.subscribe([TOPIC])
    seen = 0
    first: tuple[float, int] | None = None
    started = time.perf_counter()
    try:
        while seen < n:
            if time.perf_counter() - started > timeout_s:
                raise SystemExit(f"plain consumer: only {seen}/{n} records in {timeout_s:g} s")
            batches = consumer.poll(timeout_ms=200, max_records=MAX_POLL_RECORDS)
            got = sum(len(records) for records in batches.values())
            seen += got
            if got and first is None:
                first = (time.perf_counter(), seen)
        done = time.perf_counter()
    finally:
        consumer.close(autocommit=False)
    assert first is not None
    return {"steady": (n - first[1]) / (done - first[0]), "wall": n / (done - started)}


def casewatch_pipeline(
    bootstrap: str, n: int, timeout_s: float, workdir: Path, screen_processes: int = 0
) -> dict[str, float]:
    from prometheus_client import CollectorRegistry

    from monitor.stream.runner import DaemonRunner

    settings = bench_settings(
        bootstrap,
        workdir / f"{uuid.uuid4().hex[:8]}.db",
        sampling={"default_rate": 0.0},
        daemon={"screen_processes": screen_processes},
    )
    # No process collectors: they read /proc on every collect(), and this loop polls.
    registry = CollectorRegistry()

    def value(name: str) -> float:
        return sum(s.value for f in registry.collect() for s in f.samples if s.name == name)

    started = time.perf_counter()
    runner = DaemonRunner(settings, registry).start()
    try:
        first_at = wait_until(
            lambda: value("casewatch_turns_consumed_total") > 0, timeout_s, "the first record"
        )
        first_n = value("casewatch_turns_consumed_total")
        done = wait_until(
            lambda: value("casewatch_turns_skipped_total") >= n, timeout_s, "every turn sampled"
        )
        dead = value("casewatch_dead_letter_total")
    finally:
        runner.stop(timeout_s=30)
    if dead:
        raise SystemExit(f"casewatch dead-lettered {dead:.0f} of the bench's valid turns")
    return {"steady": (n - first_n) / (done - first_at), "wall": n / (done - started)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=1000, help="bytes per turn event")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    configure_logging("warning")
    n, timeout = args.messages, 60 + args.messages / 1000
    plain: list[float] = []
    ours: list[float] = []
    screened: list[float] = []
    with broker_with_topic(args.partitions) as broker, tempfile.TemporaryDirectory() as tmp:
        produced = fill_topic(broker.bootstrap, TOPIC, n, partitions=args.partitions)
        print(f"produced {n} turn events of ~{args.size} B at {produced:,.0f} msgs/s")
        for r in range(args.rounds):
            plain.append(plain_consumer(broker.bootstrap, n, timeout)["steady"])
            ours.append(casewatch_pipeline(broker.bootstrap, n, timeout, Path(tmp))["steady"])
            screened.append(
                casewatch_pipeline(broker.bootstrap, n, timeout, Path(tmp), 1)["steady"]
            )
            print(
                f"  round {r + 1}: plain KafkaConsumer {plain[-1]:8,.0f} msgs/s | casewatch "
                f"{ours[-1]:8,.0f} ({ours[-1] / plain[-1]:.2f}) | casewatch, "
                f"screen_processes 1 {screened[-1]:8,.0f} ({screened[-1] / plain[-1]:.2f})"
            )
    ratios = [o / p for o, p in zip(ours, plain, strict=True)]
    screened_ratios = [o / p for o, p in zip(screened, plain, strict=True)]
    ratio, screened_ratio = statistics.median(ratios), statistics.median(screened_ratios)
    rate_plain, rate_ours = statistics.median(plain), statistics.median(ours)
    overhead_us = (1 / rate_ours - 1 / rate_plain) * 1e6
    print(
        f"median of {args.rounds} rounds: casewatch {ratio:.2f} of the plain consumer, with "
        f"one screening process {screened_ratio:.2f} (target >= 0.9); casewatch adds "
        f"{overhead_us:.0f} us/msg on its thread; kafka-python CRC-32C: {crc32c_impl()}"
    )
    result = {
        "bench": "ingest",
        "messages": n,
        "message_bytes": args.size,
        "partitions": args.partitions,
        "rounds": args.rounds,
        "produce_msgs_per_second": round(produced),
        "plain_consumer_msgs_per_second": round(rate_plain),
        "casewatch_msgs_per_second": round(rate_ours),
        "casewatch_ratio_to_plain_consumer": round(ratio, 3),
        "screened_msgs_per_second": round(statistics.median(screened)),
        "screened_ratio_to_plain_consumer": round(screened_ratio, 3),
        "casewatch_overhead_us_per_msg": round(overhead_us, 1),
        "crc32c": crc32c_impl(),
        "target_ratio": 0.9,
        "meets_target": max(ratio, screened_ratio) >= 0.9,
        "rounds_plain": [round(p) for p in plain],
        "rounds_casewatch": [round(o) for o in ours],
        "rounds_screened": [round(o) for o in screened],
        "rounds_ratio": [round(x, 3) for x in ratios],
        "rounds_screened_ratio": [round(x, 3) for x in screened_ratios],
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
