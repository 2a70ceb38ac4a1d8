"""What one full garbage collection costs a running daemon, its startup heap frozen or not.

Starts the real daemon (``DaemonRunner``, what ``casewatch run`` builds) on the embedded broker
with the outcome feed and unsampled turns kept, as ``ingest.py --outcomes`` does, waits until
it has read the turns it was given (in its loop, past the group's join), then times
``gc.collect()`` (a full collection: every object the collector tracks walked, the GIL held)
``--runs`` times, freezes the heap as ``casewatch run`` does (``monitor/runtime/heap.py``) and
times it ``--runs`` times again. Reports the objects
tracked and the medians; ends with one JSON line.

    .venv/bin/python bench/full_collection.py [--runs 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.ingest import (
    OUTCOMES_TOPIC,
    TOPIC,
    bench_settings,
    broker_with_topic,
    fill_topic,
    kafka_section,
    wait_until,
)
from monitor.runtime.heap import freeze_startup_heap
from monitor.runtime.logs import configure_logging


def _collections_ms(runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        gc.collect()
        times.append((time.perf_counter() - started) * 1000)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="full collections timed each way")
    args = parser.parse_args(argv)
    configure_logging("warning")
    from prometheus_client import CollectorRegistry

    from monitor.stream.runner import DaemonRunner

    with broker_with_topic(2) as broker, tempfile.TemporaryDirectory() as tmp:
        kafka = kafka_section(broker.bootstrap)
        kafka["topics"] = [TOPIC, {"name": OUTCOMES_TOPIC, "kind": "outcomes"}]
        settings = bench_settings(
            broker.bootstrap,
            Path(tmp) / "store.db",
            kafka=kafka,
            sampling={"default_rate": 0.0},
            outcomes={"retain_unsampled": True},
        )
        fill_topic(broker.bootstrap, TOPIC, 100, partitions=2)
        registry = CollectorRegistry()
        runner = DaemonRunner(settings, registry).start()

        def consumed() -> float:
            return sum(
                s.value
                for f in registry.collect()
                for s in f.samples
                if s.name == "casewatch_turns_consumed_total"
            )

        try:
            wait_until(lambda: consumed() >= 100, 60, "the turns read")
            tracked = len(gc.get_objects())
            before = _collections_ms(args.runs)
            frozen = freeze_startup_heap()
            after = _collections_ms(args.runs)
            still_tracked = len(gc.get_objects())
        finally:
            gc.unfreeze()
            runner.stop(timeout_s=30)
    print(
        f"objects tracked: {tracked:,}; a full collection {statistics.median(before):.1f} ms "
        f"(median of {args.runs}: {', '.join(f'{t:.1f}' for t in before)}); frozen "
        f"{frozen:,}, {still_tracked:,} still tracked: {statistics.median(after):.2f} ms "
        f"({', '.join(f'{t:.2f}' for t in after)})"
    )
    print(
        json.dumps(
            {
                "bench": "full_collection",
                "runs": args.runs,
                "objects_tracked": tracked,
                "objects_frozen": frozen,
                "full_collection_ms": round(statistics.median(before), 2),
                "full_collection_frozen_ms": round(statistics.median(after), 3),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
