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
the rounds. The target is >= 0.9. Each contender's CPU time per message over the
same steady window is reported too (all threads; for screening, its processes as well), and
from it the cores casewatch would need to keep up with the plain consumer's rate.

Both contenders fetch with ``--fetch-max-wait-ms`` (default ``consumers.tansu.FETCH_MAX_WAIT_MS``,
20 ms). Tansu 0.6 sleeps after every fetch, data or not: at Kafka's default of 500 ms, 250 ms
per response of <= 5 MB, which paces both contenders at ~16-23k msgs/s with their CPUs mostly
idle, and the ratio then measures how their fetches interleave with those sleeps, not what
either costs. A real Kafka broker answers a fetch as soon as it has data, so a consumer
reading a backlog is bound by its own CPU: that is what the default measures.
``--fetch-max-wait-ms 500`` shows the paced regime.

    .venv/bin/python bench/ingest.py [--messages 50000] [--rounds 3] [--fetch-max-wait-ms 20]
        [--screen-processes 1] [--library-reader] [--library-fetch-order]

Prints a readable report, then one JSON line of results. The helpers above ``main`` (broker,
bulk producing, settings) are shared with bench/judging.py and bench/memory.py.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ and tests/ are not installed packages

from consumers._kafka import KafkaConsumer, KafkaProducer, KafkaTopicPartition  # noqa: E402
from consumers.tansu import FETCH_MAX_WAIT_MS, EmbeddedBroker, create_topics  # noqa: E402
from monitor.config.settings import Settings, load_settings  # noqa: E402
from monitor.runtime.heap import freeze_startup_heap  # noqa: E402
from monitor.runtime.logs import configure_logging  # noqa: E402

TOPIC = "bench.turns"
OUTCOMES_TOPIC = "bench.outcomes"
DLQ_SUFFIX = ".dlq"
# Fast group joins on a one-consumer group (see DESIGN.md: ~3 s instead of ~23 s).
FAST_GROUP = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000}
MAX_POLL_RECORDS = 500
BROKER_PROCESS = "tansu"  # the embedded broker's process name (``broker_with_topic``)
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


def records_held(bootstrap: str, topic: str, idle_s: float = 5.0) -> int:
    """How many records a consumer starting from the earliest offsets reads from ``topic``, as
    every contender does: read once from the start of every partition to its end offset (or
    until nothing came for ``idle_s``). Right after a bulk fill from two producers, Tansu has
    at times answered a partition's earliest offset past offset 0 (703 and 1,038 on partition
    0, seen 2026-12-08), so no consumer starting from the earliest offset saw those records,
    and every contender waited for records it would never read."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, max_poll_records=MAX_POLL_RECORDS
    )
    try:
        partitions = sorted(consumer.partitions_for_topic(topic) or ())
        tps = [KafkaTopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        count, quiet_since = 0, time.monotonic()
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            got = sum(len(r) for r in consumer.poll(timeout_ms=200).values())
            count += got
            if got:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since > idle_s:
                break
    finally:
        consumer.close()
    return count


def held_or_exit(bootstrap: str, topic: str, produced: int) -> int:
    """The records ``topic`` holds, to be read in full by every contender: ``produced`` when
    the broker kept them all; fewer, said, when it did not; an exit with the reason when it kept
    none or more than were produced (another run's records: the counts would be wrong)."""
    held = records_held(bootstrap, topic)
    if held == produced:
        return held
    if not 0 < held < produced:
        raise SystemExit(f"{topic}: the broker holds {held} records after {produced} produced")
    print(
        f"note: {topic}: the broker kept {held} of the {produced} records produced "
        f"(a consumer reads no more); every contender reads those {held}"
    )
    return held


@contextmanager
def broker_with_topic(partitions: int, topic: str = TOPIC) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as broker:
        create_topics(broker.bootstrap, [topic], partitions, dlq_suffix=DLQ_SUFFIX)
        yield broker


def kafka_section(
    bootstrap: str,
    topic: str = TOPIC,
    group: str | None = None,
    fetch_max_wait_ms: int = FETCH_MAX_WAIT_MS,
) -> dict[str, Any]:
    """The ``kafka`` settings of a bench daemon: the bench broker and a fresh group."""
    return {
        "bootstrap_servers": [bootstrap],
        "topics": [topic],
        "group_id": group or f"bench-{uuid.uuid4().hex[:8]}",
        "dlq_suffix": DLQ_SUFFIX,
        "max_poll_records": MAX_POLL_RECORDS,
        "max_poll_interval_ms": 10000,
        "fetch_max_wait_ms": fetch_max_wait_ms,
        **FAST_GROUP,
    }


# Every turn judged and no hourly budget unless a bench says otherwise: the shipped defaults
# (a tenth, 1000 calls/h) would change what the benches measure.
BENCH_SAMPLING: dict[str, Any] = {
    "default_rate": 1.0,
    "budget_calls_per_hour": None,
    "budget_usd_per_hour": None,
}


def bench_settings(bootstrap: str, db_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "kafka": kafka_section(bootstrap),
        "storage": {"url": f"sqlite:///{db_path}", "retention_days": None},
        "server": {"port": 0},
        "log_level": "warning",
    }
    sampling = {**BENCH_SAMPLING, **overrides.pop("sampling", {})}
    values.update(overrides)
    return load_settings(None, sampling=sampling, **values)


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


# ---------------------------------------------------------------- the contenders


def _cpu_s(children: bool) -> float:
    """CPU seconds of this process (all threads), plus its live child processes' (the
    screening pool and its forkserver) if ``children``. The embedded broker is a child of this
    process too, and is left out: neither the plain consumer nor casewatch is charged for it."""
    total = time.process_time()
    if children:
        for child in psutil.Process().children(recursive=True):
            try:
                if child.name() == BROKER_PROCESS:
                    continue
                times = child.cpu_times()
            except psutil.Error:  # exited meanwhile
                continue
            total += times.user + times.system
    return total


def plain_consumer(
    bootstrap: str,
    n: int,
    timeout_s: float,
    fetch_max_wait_ms: int = FETCH_MAX_WAIT_MS,
    outcome_events: int = 0,
) -> dict[str, float]:
    """``outcome_events``: read that many records of ``OUTCOMES_TOPIC`` too, as casewatch with
    the outcome feed does; the rates are still per turn (the time to read turns and outcomes
    alike), so they compare with that contender's."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=f"plain-{uuid.uuid4().hex[:8]}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=MAX_POLL_RECORDS,
        max_poll_interval_ms=10000,
        fetch_max_wait_ms=fetch_max_wait_ms,
        **FAST_GROUP,
    )
    consumer.subscribe([TOPIC, OUTCOMES_TOPIC] if outcome_events else [TOPIC])
    total = n + outcome_events
    seen = 0
    per_partition: dict[int, int] = {}  # for the timeout's message: which partition stalled
    first: tuple[float, int, float] | None = None
    started = time.perf_counter()
    try:
        while seen < total:
            if time.perf_counter() - started > timeout_s:
                raise SystemExit(
                    f"plain consumer: only {seen}/{total} records in {timeout_s:g} s "
                    f"(per partition {dict(sorted(per_partition.items()))})"
                )
            batches = consumer.poll(timeout_ms=200, max_records=MAX_POLL_RECORDS)
            got = 0
            for tp, records in batches.items():
                got += len(records)
                per_partition[tp.partition] = per_partition.get(tp.partition, 0) + len(records)
            seen += got
            if got and first is None:
                first = (time.perf_counter(), seen, _cpu_s(False))
        done, cpu = time.perf_counter(), _cpu_s(False)
    finally:
        consumer.close(autocommit=False)
    assert first is not None
    rates = _rates(total, started, first, done, cpu)
    share = n / total  # per turn: the same time, the turns of the records read
    return {"steady": rates["steady"] * share, "wall": rates["wall"] * share,
            "cpu_us": rates["cpu_us"] / share}  # fmt: skip


class Collections:
    """The garbage collector's time in this process (every thread's collections), and how many
    were full ones, read by ``gc.callbacks``."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.full = 0
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
            return
        self.seconds += time.perf_counter() - self._began
        self.full += info["generation"] == 2

    def read(self) -> tuple[float, int]:
        return self.seconds, self.full


def _rates(
    n: int, started: float, first: tuple[float, int, float], done: float, cpu: float
) -> dict[str, float]:
    steady_n = n - first[1]
    return {
        "steady": steady_n / (done - first[0]),
        "wall": n / (done - started),
        "cpu_us": (cpu - first[2]) / steady_n * 1e6,
    }


def outcome_bytes(i: int, run: str = "bench") -> bytes:
    """Negative feedback on turn ``i`` (an outcome event, docs/outcomes.md)."""
    doc = {
        "outcome_id": f"{run}-fb-{i}",
        "kind": "feedback",
        "assistant": "bench-assistant",
        "timestamp": "2026-11-02T09:07:00Z",
        "turn_event_id": f"{run}-{i}",
        "thumbs": "down",
    }
    return json.dumps(doc).encode()


def fill_outcomes(bootstrap: str, n_turns: int, every: int) -> int:
    """Feedback on every ``every``-th turn to ``OUTCOMES_TOPIC``; returns how many."""
    create_topics(bootstrap, [OUTCOMES_TOPIC], 1, dlq_suffix=DLQ_SUFFIX)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=50)
    count = 0
    for i in range(0, n_turns, every):
        producer.send(OUTCOMES_TOPIC, value=outcome_bytes(i))
        count += 1
    producer.flush(timeout=120)
    producer.close(timeout=10)
    return count


def casewatch_pipeline(
    bootstrap: str,
    n: int,
    timeout_s: float,
    workdir: Path,
    screen_processes: int = 0,
    fetch_max_wait_ms: int = FETCH_MAX_WAIT_MS,
    tripwire: bool = True,
    library_reader: bool = False,
    library_fetch_order: bool = False,
    outcome_events: int = 0,
    retain: bool = False,
    retain_process: bool = True,
    gc_freeze: bool = True,
    on_window: Callable[[str], None] | None = None,
) -> dict[str, float]:
    """``outcome_events``: also read that many feedback events from ``OUTCOMES_TOPIC``;
    ``retain``: keep every unsampled turn for feedback-triggered judging
    (``outcomes.retain_unsampled``). ``gc_freeze``: the startup heap frozen once the daemon
    is built, as ``casewatch run`` does (``monitor/runtime/heap.py``). ``on_window``: called
    with ``"first"`` and ``"done"`` as the steady window opens and closes."""
    from prometheus_client import CollectorRegistry

    import consumers.group_consumer
    from monitor.stream.runner import DaemonRunner

    kafka = kafka_section(bootstrap, fetch_max_wait_ms=fetch_max_wait_ms)
    extra: dict[str, Any] = {}
    if outcome_events:
        kafka["topics"] = [TOPIC, {"name": OUTCOMES_TOPIC, "kind": "outcomes"}]
    if retain:
        extra["outcomes"] = {"retain_unsampled": True, "retain_process": retain_process}
    settings = bench_settings(
        bootstrap,
        workdir / f"{uuid.uuid4().hex[:8]}.db",
        kafka=kafka,
        sampling={"default_rate": 0.0, "identifier_tripwire": tripwire},
        daemon={"screen_processes": screen_processes},
        **extra,
    )
    # No process collectors: they read /proc on every collect(), and this loop polls.
    registry = CollectorRegistry()

    def value(name: str) -> float:
        # The one family asked for, not the whole registry: this runs every 50 ms on the main
        # thread beside the daemon, and a whole collect() costs what the registry holds (0.3-1
        # ms, more with every series casewatch adds), charged to casewatch's CPU and the GIL.
        collector = families.get(name.removesuffix("_total"))
        if collector is None:  # not exported by this checkout: nothing counted
            return 0.0
        return sum(s.value for f in collector.collect() for s in f.samples if s.name == name)

    def value_of(name: str, labels: dict[str, str]) -> float:
        collector = families.get(name.removesuffix("_total"))
        if collector is None:
            return 0.0
        return sum(
            s.value
            for f in collector.collect()
            for s in f.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        )

    # The screening pool and the keeper of unsampled turns run in processes of their own:
    # their CPU is casewatch's too.
    children = screen_processes > 0 or retain
    reader, fetch_order = (
        consumers.group_consumer.read_raw_records,
        consumers.group_consumer.refetch_left_out,
    )
    if library_reader:  # the consumer keeps kafka-python's reader (consumers/_kafka_records.py)
        consumers.group_consumer.read_raw_records = lambda consumer: False  # type: ignore[assignment]
    if library_fetch_order:  # and kafka-python's fetch order (consumers/_kafka_fetch_order.py)
        consumers.group_consumer.refetch_left_out = lambda consumer: False  # type: ignore[assignment]
    collections = Collections()
    gc.callbacks.append(collections)
    started = time.perf_counter()
    try:
        runner = DaemonRunner(settings, registry).start()
    finally:
        consumers.group_consumer.read_raw_records = reader
        consumers.group_consumer.refetch_left_out = fetch_order
    if gc_freeze:
        freeze_startup_heap()
    families = {
        family.name: collector
        for collector in vars(runner.metrics).values()
        if callable(getattr(collector, "describe", None))
        for family in collector.describe()
    }
    try:
        first_at = wait_until(
            lambda: value("casewatch_turns_consumed_total") > 0, timeout_s, "the first record"
        )
        first = (first_at, int(value("casewatch_turns_consumed_total")), _cpu_s(children))
        gc_first = collections.read()
        if on_window is not None:
            on_window("first")
        done = wait_until(
            lambda: (
                value("casewatch_turns_skipped_total") >= n
                and value("casewatch_outcome_events_total") >= outcome_events
            ),
            timeout_s,
            "every turn sampled",
        )
        cpu = _cpu_s(children)
        gc_done = collections.read()
        if on_window is not None:
            on_window("done")
        dead = value("casewatch_dead_letter_total")
        kept = lag = 0.0
        if retain:
            # Intake is timed to the last turn read; then, apart, how long the keeper of the
            # unsampled turns took to catch up, and how many it kept (a keeper that cannot
            # keep up drops turns, counted, rather than hold intake).
            def settled() -> float:
                return sum(
                    value_of("casewatch_turns_retained_total", {"outcome": o})
                    for o in ("stored", "dropped", "failed")
                )

            lag = wait_until(lambda: settled() >= n, timeout_s, "every turn kept") - done
            kept = value_of("casewatch_turns_retained_total", {"outcome": "stored"}) / n
            cpu = _cpu_s(children)  # the keeper's work on these turns is theirs too
    finally:
        runner.stop(timeout_s=30)
        gc.callbacks.remove(collections)
        if gc_freeze:
            gc.unfreeze()  # the next contender's daemon freezes its own heap
    if dead:
        raise SystemExit(f"casewatch dead-lettered {dead:.0f} of the bench's valid turns")
    rates = _rates(n, started, first, done, cpu)
    # The collector's time from the first turn to the last, per turn, and its full collections.
    rates["gc_us"] = (gc_done[0] - gc_first[0]) / (n - first[1]) * 1e6
    rates["first_count"] = first[1]  # turns counted when the steady window opened
    rates["full_collections"] = gc_done[1] - gc_first[1]
    if retain:
        rates["kept"] = kept
        rates["keeper_lag_s"] = lag
    return rates


def _median(rounds: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rounds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=1000, help="bytes per turn event")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--fetch-max-wait-ms",
        type=int,
        default=FETCH_MAX_WAIT_MS,
        help="both contenders' fetch_max_wait_ms (Tansu sleeps half of 500, the Kafka default, "
        "after every fetch: see the module docstring)",
    )
    parser.add_argument("--screen-processes", type=int, default=1)
    parser.add_argument(
        "--library-reader",
        action="store_true",
        help="a further contender: casewatch with kafka-python's own record reader instead of "
        "casewatch's (consumers/_kafka_records.py)",
    )
    parser.add_argument(
        "--library-fetch-order",
        action="store_true",
        help="a further contender: casewatch with kafka-python's own fetch order, a partition "
        "left out of a full response fetched only once the rest is read "
        "(consumers/_kafka_fetch_order.py)",
    )
    parser.add_argument(
        "--outcomes",
        action="store_true",
        help="two further contenders: casewatch also reading feedback on every tenth turn from "
        "an outcomes topic, without and with unsampled turns kept for feedback "
        "(outcomes.retain_unsampled)",
    )
    parser.add_argument(
        "--no-tripwire",
        dest="tripwire",
        action="store_false",
        help="casewatch without the identifier tripwire (sampling.identifier_tripwire: false)",
    )
    parser.add_argument(
        "--no-gc-freeze",
        dest="gc_freeze",
        action="store_false",
        help="casewatch without its startup heap frozen (as before casewatch run froze it)",
    )
    args = parser.parse_args(argv)
    configure_logging("warning")
    n, timeout, wait_ms = args.messages, 60 + args.messages / 1000, args.fetch_max_wait_ms
    names: tuple[str, ...] = ("plain", "casewatch", "screened")
    # The optional contenders: casewatch with one of its kafka-python replacements undone.
    extras = [
        (name, label)
        for name, label, chosen in (
            ("library_reader", "kafka-python's reader", args.library_reader),
            ("library_fetch_order", "kafka-python's fetch order", args.library_fetch_order),
            ("outcome_feed", "outcome events", args.outcomes),
            ("outcomes", "outcome events and unsampled turns kept", args.outcomes),
            (
                "outcomes_thread",
                "outcome events and unsampled turns kept on a thread (retain_process: false)",
                args.outcomes,
            ),
        )
        if chosen
    ]
    names += tuple(name for name, _ in extras)
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    rounds_both: list[dict[str, float]] = []  # the plain consumer of turns and outcomes
    with broker_with_topic(args.partitions) as broker, tempfile.TemporaryDirectory() as tmp:
        produced = fill_topic(broker.bootstrap, TOPIC, n, partitions=args.partitions)
        n = held_or_exit(broker.bootstrap, TOPIC, n)
        feedback = fill_outcomes(broker.bootstrap, args.messages, 10) if args.outcomes else 0
        if feedback:
            feedback = held_or_exit(broker.bootstrap, OUTCOMES_TOPIC, feedback)
        print(
            f"produced {args.messages} turn events of ~{args.size} B at {produced:,.0f} msgs/s; "
            f"fetch_max_wait_ms {wait_ms}; tripwire {'on' if args.tripwire else 'off'}"
        )
        for r in range(args.rounds):
            plain = plain_consumer(broker.bootstrap, n, timeout, wait_ms)
            ours = casewatch_pipeline(
                broker.bootstrap,
                n,
                timeout,
                Path(tmp),
                0,
                wait_ms,
                args.tripwire,
                gc_freeze=args.gc_freeze,
            )
            screened = casewatch_pipeline(
                broker.bootstrap,
                n,
                timeout,
                Path(tmp),
                args.screen_processes,
                wait_ms,
                args.tripwire,
                gc_freeze=args.gc_freeze,
            )
            results = [plain, ours, screened]
            # The baseline of the outcome contenders: a plain consumer of the same two topics.
            plain_both = (
                plain_consumer(broker.bootstrap, n, timeout, wait_ms, outcome_events=feedback)
                if args.outcomes
                else None
            )
            for name, _ in extras:
                results.append(
                    casewatch_pipeline(
                        broker.bootstrap,
                        n,
                        timeout,
                        Path(tmp),
                        0,
                        wait_ms,
                        args.tripwire,
                        library_reader=name == "library_reader",
                        library_fetch_order=name == "library_fetch_order",
                        outcome_events=feedback if name.startswith("outcome") else 0,
                        retain=name.startswith("outcomes"),
                        retain_process=name != "outcomes_thread",
                        gc_freeze=args.gc_freeze,
                    )
                )
            for name, result in zip(names, results, strict=True):
                result["ratio"] = result["steady"] / plain["steady"]
                if plain_both is not None and name.startswith("outcome"):
                    result["ratio_same_topics"] = result["steady"] / plain_both["steady"]
                rounds[name].append(result)
            if plain_both is not None:
                rounds_both.append(plain_both)
            print(
                f"  round {r + 1}: plain KafkaConsumer {plain['steady']:8,.0f} msgs/s "
                f"({plain['cpu_us']:.1f} us CPU/msg) | casewatch {ours['steady']:8,.0f} "
                f"({ours['ratio']:.2f}; {ours['cpu_us']:.1f} us) | screen_processes "
                f"{args.screen_processes} {screened['steady']:8,.0f} ({screened['ratio']:.2f}; "
                f"{screened['cpu_us']:.1f} us)"
                + "".join(
                    f" | {label} {rounds[name][-1]['steady']:8,.0f} "
                    f"({rounds[name][-1]['ratio']:.2f}; {rounds[name][-1]['cpu_us']:.1f} us)"
                    for name, label in extras
                )
                + (
                    f" | plain KafkaConsumer of turns and outcomes "
                    f"{rounds_both[-1]['steady']:8,.0f}"
                    f" turns/s ({rounds_both[-1]['cpu_us']:.1f} us a turn)"
                    if rounds_both
                    else ""
                )
            )
    med = {
        name: {k: _median(rounds[name], k) for k in ("steady", "ratio", "cpu_us")} for name in names
    }
    # What reading at the plain consumer's rate would take, in cores: casewatch's CPU per
    # message (every thread and process of it) times that rate. The broker and the producer-free
    # rest of the machine share what is left of its cores.
    cores = {
        name: med["plain"]["steady"] * med[name]["cpu_us"] / 1e6
        for name in ("casewatch", "screened")
    }
    print(
        f"median of {args.rounds} rounds: casewatch {med['casewatch']['ratio']:.2f} of the plain "
        f"consumer, with {args.screen_processes} screening process(es) "
        f"{med['screened']['ratio']:.2f} (target >= 0.9). CPU per message: plain "
        f"{med['plain']['cpu_us']:.1f} us, casewatch {med['casewatch']['cpu_us']:.1f} us, "
        f"screened {med['screened']['cpu_us']:.1f} us; at the plain consumer's rate casewatch "
        f"would need {cores['casewatch']:.2f} cores ({cores['screened']:.2f} screened) on a "
        f"{os.cpu_count()}-core machine; kafka-python CRC-32C: {crc32c_impl()}; garbage "
        f"collections {_median(rounds['casewatch'], 'gc_us'):.1f} us a message "
        f"(startup heap {'frozen' if args.gc_freeze else 'not frozen'})"
    )
    kept = {name: _median(rounds[name], "kept") for name in names if "kept" in rounds[name][0]}
    lag = {name: _median(rounds[name], "keeper_lag_s") for name in kept}
    same = {
        name: _median(rounds[name], "ratio_same_topics")
        for name in names
        if "ratio_same_topics" in rounds[name][0]
    }
    for name, label in extras:
        print(
            f"casewatch with {label}: {med[name]['ratio']:.2f} of the plain consumer"
            + (
                f" ({same[name]:.2f} of a plain consumer of the same two topics)"
                if name in same
                else ""
            )
            + f", {med[name]['cpu_us']:.1f} us CPU per message"
            + f" ({_median(rounds[name], 'gc_us'):.1f} us of it in garbage collections)"
            + (
                f"; {kept[name]:.1%} of the turns kept, the last {lag[name]:.2f} s after the "
                "last turn was read"
                if name in kept
                else ""
            )
        )
    result = {
        "bench": "ingest",
        "messages": n,
        "messages_produced": args.messages,
        "message_bytes": args.size,
        "partitions": args.partitions,
        "rounds": args.rounds,
        "fetch_max_wait_ms": wait_ms,
        "screen_processes": args.screen_processes,
        "tripwire": args.tripwire,
        "cpu_count": os.cpu_count(),
        "produce_msgs_per_second": round(produced),
        "plain_consumer_msgs_per_second": round(med["plain"]["steady"]),
        "casewatch_msgs_per_second": round(med["casewatch"]["steady"]),
        "casewatch_ratio_to_plain_consumer": round(med["casewatch"]["ratio"], 3),
        "screened_msgs_per_second": round(med["screened"]["steady"]),
        "screened_ratio_to_plain_consumer": round(med["screened"]["ratio"], 3),
        "plain_cpu_us_per_msg": round(med["plain"]["cpu_us"], 1),
        "casewatch_cpu_us_per_msg": round(med["casewatch"]["cpu_us"], 1),
        "screened_cpu_us_per_msg": round(med["screened"]["cpu_us"], 1),
        "casewatch_cores_at_plain_rate": round(cores["casewatch"], 2),
        "screened_cores_at_plain_rate": round(cores["screened"], 2),
        "crc32c": crc32c_impl(),
        "gc_freeze": args.gc_freeze,
        "target_ratio": 0.9,
        "meets_target": max(med["casewatch"]["ratio"], med["screened"]["ratio"]) >= 0.9,
        **{
            key: value
            for name, _ in extras
            for key, value in (
                (f"{name}_ratio_to_plain_consumer", round(med[name]["ratio"], 3)),
                (f"{name}_cpu_us_per_msg", round(med[name]["cpu_us"], 1)),
            )
        },
        **{
            f"rounds_{name}_{key}": [
                round(r[key], 3 if key == "ratio" else 1) for r in rounds[name]
            ]
            for name in names
            for key in ("steady", "ratio", "cpu_us", "gc_us", "full_collections")
            if not (name == "plain" and key != "steady" and key != "cpu_us")
        },
    }
    result.update({f"{name}_kept_share": round(share, 4) for name, share in kept.items()})
    result.update(
        {f"{name}_ratio_to_plain_same_topics": round(ratio, 3) for name, ratio in same.items()}
    )
    result.update(
        {
            f"rounds_{name}_ratio_same_topics": [
                round(r["ratio_same_topics"], 3) for r in rounds[name]
            ]
            for name in same
        }
    )
    if rounds_both:
        result["plain_same_topics_turns_per_second"] = round(_median(rounds_both, "steady"))
    result.update({f"{name}_keeper_lag_s": round(lag[name], 3) for name in kept})
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
