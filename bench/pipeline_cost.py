"""Casewatch's per-message cost on the ingest path, without a broker.

The real ``Daemon`` loop (poll → track → decode + validate → sample → commit) over an
in-memory source that hands out kafka-python-shaped records (converted by the Kafka source's
own ``_to_raw``), sampling rate 0 as in ``ingest.py``. Without broker I/O and kafka-python's
threads this is far steadier than ``ingest.py`` on a shared machine, so it is the figure to
compare before and after a change to the pipeline. Reported: microseconds per message for the
whole loop, and for conversion + ``decode_turn`` alone (pydantic's share).

    .venv/bin/python bench/pipeline_cost.py [--messages 30000] [--repeat 9]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ is not an installed package

from prometheus_client import CollectorRegistry  # noqa: E402

from bench.ingest import bench_settings, turn_bytes  # noqa: E402
from consumers.decode import decode_turn  # noqa: E402
from consumers.kafka_source import _to_raw  # noqa: E402
from consumers.records import RawMessage, TopicPartition  # noqa: E402
from monitor.exporter import Metrics  # noqa: E402
from monitor.logs import configure_logging  # noqa: E402
from monitor.stream.daemon import Daemon  # noqa: E402

TOPIC = "bench.turns"
PARTITIONS = 2
MAX_BYTES = 1 << 20


class _MemorySource:
    """Records in partition runs, as a Kafka poll returns them; commits are remembered."""

    def __init__(self, records: list[Any]) -> None:
        self._records = records
        self._at = 0
        self.committed: dict[TopicPartition, int] = {}

    def poll(self, timeout_s: float, max_records: int) -> list[RawMessage]:
        batch = self._records[self._at : self._at + max_records]
        self._at += len(batch)
        return [_to_raw(r) for r in batch]

    def commit(self, offsets: Mapping[TopicPartition, int], timeout_s: float | None = None) -> None:
        self.committed.update(offsets)

    def pause(self, tps: Iterable[TopicPartition]) -> None:
        return None

    def resume(self, tps: Iterable[TopicPartition]) -> None:
        return None

    def paused(self) -> set[TopicPartition]:
        return set()

    def assignment(self) -> set[TopicPartition]:
        return {TopicPartition(TOPIC, p) for p in range(PARTITIONS)}

    def lag(self) -> dict[TopicPartition, int]:
        return {}

    def set_rebalance_listener(self, on_assigned: Any, on_revoked: Any) -> None:
        return None

    def ping(self) -> bool:
        return True

    def close(self) -> None:
        return None


class _NoDeadLetters:
    def send(self, msg: RawMessage, reason: str, detail: str) -> None:
        raise AssertionError(f"every record is valid, got {reason}: {detail}")

    def flush(self, timeout_s: float) -> None:
        return None

    def close(self) -> None:
        return None


class _IdleStore:
    """Nothing is judged at rate 0, so nothing is stored; the daemon only pings it."""

    def ping(self) -> bool:
        return True

    def close(self) -> None:
        return None


def kafka_records(n: int) -> list[Any]:
    records = [
        SimpleNamespace(
            topic=TOPIC,
            partition=i % PARTITIONS,
            offset=i // PARTITIONS,
            value=turn_bytes(i),
            key=None,
            headers=[],
            timestamp=1_700_000_000_000 + i,
        )
        for i in range(n)
    ]
    return sorted(records, key=lambda r: (r.partition, r.offset))


def daemon_us_per_msg(records: list[Any], workdir: Path) -> tuple[float, float]:
    """Wall-clock and CPU (this thread's ``thread_time``) microseconds per message."""
    settings = bench_settings("localhost:9", workdir / "unused.db", sampling={"default_rate": 0.0})
    source = _MemorySource(records)
    daemon = Daemon(
        settings,
        source,
        _NoDeadLetters(),
        _IdleStore(),  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]  # nothing is judged at rate 0
        Metrics(CollectorRegistry()),
        exit_when_idle=True,
    )
    start, cpu_start = time.perf_counter(), time.thread_time()
    daemon.run()
    elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu_start
    expected = {TopicPartition(TOPIC, p): len(records) // PARTITIONS for p in range(PARTITIONS)}
    if source.committed != expected:
        raise SystemExit(f"committed {source.committed}, expected {expected}")
    return elapsed / len(records) * 1e6, cpu / len(records) * 1e6


def decode_us_per_msg(records: list[Any]) -> tuple[float, float]:
    start, cpu_start = time.perf_counter(), time.thread_time()
    for r in records:
        decode_turn(_to_raw(r), MAX_BYTES)
    elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu_start
    return elapsed / len(records) * 1e6, cpu / len(records) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=30_000)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args(argv)
    configure_logging("warning")
    records = kafka_records(args.messages - args.messages % PARTITIONS)
    with tempfile.TemporaryDirectory() as tmp:
        loops = [daemon_us_per_msg(records, Path(tmp)) for _ in range(args.repeat)]
    decodes = [decode_us_per_msg(records) for _ in range(args.repeat)]
    loop, decode = sorted(w for w, _ in loops), sorted(w for w, _ in decodes)
    # CPU time of the loop's thread: on a loaded machine steadier than wall clock, since the
    # time the thread waits to be scheduled is left out.
    loop_cpu, decode_cpu = sorted(c for _, c in loops), sorted(c for _, c in decodes)
    result = {
        "bench": "pipeline_cost",
        "messages": len(records),
        "daemon_us_per_msg_best": round(loop[0], 2),
        "daemon_us_per_msg_median": round(loop[len(loop) // 2], 2),
        "convert_decode_us_per_msg_best": round(decode[0], 2),
        "daemon_cpu_us_per_msg_median": round(loop_cpu[len(loop_cpu) // 2], 2),
        "convert_decode_cpu_us_per_msg_median": round(decode_cpu[len(decode_cpu) // 2], 2),
    }
    print(
        f"daemon loop {loop[0]:.2f} us/msg (median {loop[len(loop) // 2]:.2f}); "
        f"of which conversion + decode + validation {decode[0]:.2f} us/msg\n"
        f"CPU time of the loop's thread: {loop_cpu[len(loop_cpu) // 2]:.2f} us/msg (median), "
        f"conversion + decode + validation {decode_cpu[len(decode_cpu) // 2]:.2f} us/msg"
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
