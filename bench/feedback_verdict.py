"""From a customer's negative feedback on an unsampled turn to that turn's verdict, through
the real daemon.

Starts its own Tansu broker, puts ``--turns`` turn events on a topic, and runs casewatch's
daemon (``DaemonRunner``, in this process, its own Prometheus registry) on it with nothing
sampled at random (``sampling.default_rate: 0``), every unsampled turn kept as its Kafka
record's place (``outcomes.retain_unsampled``), an outcomes topic, the default offline
(heuristic) judge and a SQLite file, the feedback judging job every ``--interval`` seconds
(the default: ``outcomes.feedback_judging_interval_seconds``, 15 s). Once every turn is kept
(``casewatch_turns_retained_total{outcome="stored"}``), ``--runs`` times: one negative
feedback on a turn not asked for before goes to the outcomes topic, and the SQLite store is
polled (read-only, every 50 ms) until that turn's verdict is in ``verdicts``; the seconds from
the send to the verdict seen are the figure (producing, the outcome intake's write, the wait
for the job, the read-back from Kafka, the judge call, the store's write).

The worst case: each feedback is sent just after a feedback judging run ended
(``casewatch_job_runs_total{job="feedback_judging"}`` seen to rise, polled every 5 ms), so it
waits for the whole of the next interval. ``--random-phase`` sends it at a random point of the
interval instead (the average case: half an interval more or less). The report gives, per run,
the seconds and how many job runs ended between the send and the verdict (0: judged at the
first run after it; 1 or more: it missed a run), then the median and the max.

    .venv/bin/python bench/feedback_verdict.py [--turns 200] [--runs 5] [--interval 15]
        [--random-phase]

Prints a readable report, then one JSON line of results.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ and tests/ are not installed packages

from prometheus_client import CollectorRegistry  # noqa: E402

from bench.ingest import (  # noqa: E402
    DLQ_SUFFIX,
    OUTCOMES_TOPIC,
    TOPIC,
    bench_settings,
    broker_with_topic,
    fill_topic,
    kafka_section,
    outcome_bytes,
    wait_until,
)
from consumers._kafka import KafkaProducer  # noqa: E402
from consumers.tansu import create_topics  # noqa: E402
from monitor.runtime.logs import configure_logging  # noqa: E402
from monitor.stream.runner import DaemonRunner  # noqa: E402

JOB = "feedback_judging"
POLL_S = 0.05  # the store's poll for the verdict
RUN_POLL_S = 0.005  # the metric's poll for a job run's end


class Metrics:
    """Reads one family of the daemon's registry at a time (as bench/ingest.py does: a whole
    collect() every few milliseconds would cost the daemon's GIL what the registry holds)."""

    def __init__(self, runner: DaemonRunner) -> None:
        self._families = {
            family.name: collector
            for collector in vars(runner.metrics).values()
            if callable(getattr(collector, "describe", None))
            for family in collector.describe()
        }

    def value(self, name: str, labels: dict[str, str]) -> float:
        collector = self._families.get(name.removesuffix("_total"))
        if collector is None:
            return 0.0
        return sum(
            float(s.value)
            for f in collector.collect()
            for s in f.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        )

    def job_runs(self) -> float:
        """Feedback judging runs ended (ok, failed or skipped for the lease)."""
        return self.value("casewatch_job_runs_total", {"job": JOB})

    def ran_since(self, runs: float) -> bool:
        """A feedback judging run ended since ``job_runs()`` read ``runs``."""
        return self.job_runs() > runs


def has_verdict(db: sqlite3.Connection, event_id: str) -> bool:
    row = db.execute("SELECT 1 FROM verdicts WHERE event_id = ? LIMIT 1", (event_id,)).fetchone()
    return row is not None


class VerdictWatch:
    """The poll for a turn's verdict, noting the job runs ended as of each look: read before
    the store, so the run that stored the verdict (it ends after its commit) is not counted
    unless it ended before the previous look."""

    def __init__(self, db: sqlite3.Connection, event_id: str, metrics: Metrics) -> None:
        self._db = db
        self._event_id = event_id
        self._metrics = metrics
        self.runs = metrics.job_runs()

    def __call__(self) -> bool:
        runs = self._metrics.job_runs()
        if has_verdict(self._db, self._event_id):
            return True
        self.runs = runs
        return False


def measure(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    timeout = 4 * args.interval + 60
    runs: list[dict[str, float]] = []
    with broker_with_topic(args.partitions) as broker, tempfile.TemporaryDirectory() as tmp:
        create_topics(broker.bootstrap, [OUTCOMES_TOPIC], 1, dlq_suffix=DLQ_SUFFIX)
        fill_topic(broker.bootstrap, TOPIC, args.turns, partitions=args.partitions, processes=1)
        db_path = Path(tmp) / f"{uuid.uuid4().hex[:8]}.db"
        kafka = kafka_section(broker.bootstrap)
        kafka["topics"] = [TOPIC, {"name": OUTCOMES_TOPIC, "kind": "outcomes"}]
        settings = bench_settings(
            broker.bootstrap,
            db_path,
            kafka=kafka,
            sampling={"default_rate": 0.0},
            outcomes={
                "retain_unsampled": True,
                "feedback_judging_interval_seconds": args.interval,
            },
        )
        judges = list(settings.effective_panel().primaries)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, linger_ms=0)
        runner = DaemonRunner(settings, CollectorRegistry()).start()
        try:
            metrics = Metrics(runner)
            started = time.perf_counter()
            kept_at = wait_until(
                lambda: (
                    metrics.value("casewatch_turns_retained_total", {"outcome": "stored"})
                    >= args.turns
                ),
                60 + args.turns / 100,
                f"all {args.turns} turns kept",
            )
            print(
                f"{args.turns} turns kept as their records' places in "
                f"{kept_at - started:.1f} s; judge panel {judges}; feedback judging every "
                f"{args.interval:g} s; feedback sent "
                f"{'at a random phase' if args.random_phase else 'just after a job run ended'}"
            )
            db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
            turns = rng.sample(range(args.turns), args.runs)  # each asked for once
            try:
                for k, i in enumerate(turns):
                    event_id = f"bench-{i}"
                    if has_verdict(db, event_id):
                        raise SystemExit(f"{event_id} has a verdict before its feedback")
                    # Wait for a run to end (the first run ends as the daemon starts).
                    wait_until(
                        partial(metrics.ran_since, metrics.job_runs()),
                        args.interval + 60,
                        "a feedback judging run to end",
                        RUN_POLL_S,
                    )
                    after_run = time.perf_counter()
                    if args.random_phase:
                        time.sleep(rng.uniform(0, args.interval))
                    watch = VerdictWatch(db, event_id, metrics)
                    runs_before = watch.runs
                    sent = time.perf_counter()
                    producer.send(OUTCOMES_TOPIC, value=outcome_bytes(i))
                    producer.flush(timeout=30)
                    seen = wait_until(
                        watch,
                        timeout,
                        f"the verdict of {event_id}",
                        POLL_S,
                    )
                    run = {
                        "turn": i,
                        "seconds": seen - sent,
                        "after_run_end_s": sent - after_run,
                        "runs_ended_between": watch.runs - runs_before,
                    }
                    runs.append(run)
                    print(
                        f"  run {k + 1}: feedback on turn {i} sent "
                        f"{run['after_run_end_s'] * 1000:.0f} ms after a job run ended -> verdict "
                        f"in {run['seconds']:.2f} s ({run['runs_ended_between']:.0f} job "
                        "runs ended between)"
                    )
            finally:
                db.close()
            judged = metrics.value("casewatch_feedback_judged_total", {})
        finally:
            runner.stop(timeout_s=30)
            producer.close(timeout=10)
    seconds = [r["seconds"] for r in runs]
    return {
        "bench": "feedback_verdict",
        "turns": args.turns,
        "runs": args.runs,
        "interval_s": args.interval,
        "phase": "random" if args.random_phase else "after_run",
        "judges": judges,
        "median_s": statistics.median(seconds),
        "max_s": max(seconds),
        "min_s": min(seconds),
        "seconds": seconds,
        "runs_ended_between": [r["runs_ended_between"] for r in runs],
        "feedback_judged": judged,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--interval",
        type=float,
        default=15.0,
        help="outcomes.feedback_judging_interval_seconds (the default: 15)",
    )
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument(
        "--random-phase",
        action="store_true",
        help="send each feedback at a random point of the interval, not just after a run",
    )
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.runs > args.turns:
        parser.error("--runs must be at most --turns: each feedback asks for another turn")
    configure_logging("warning")
    result = measure(args)
    print(
        f"feedback -> verdict: median {result['median_s']:.2f} s, max {result['max_s']:.2f} s "
        f"over {args.runs} runs (interval {args.interval:g} s)"
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
