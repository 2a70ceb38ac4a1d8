"""Where the daemon's CPU goes on ``ingest.py``'s Kafka path, thread by thread.

``ingest.py`` gives a ratio of rates and the CPU a turn of the whole daemon; this splits that
CPU by thread of the daemon's process (the consumer loop ``daemon``, the poll's worker
``kafka-call``, kafka-python's I/O thread, the outcome step's and the keeper's writer threads,
the keeper pool's feeder and manager threads), and by child process (the keeper's process, the
embedded broker), read from ``/proc`` every 0.2 s while the real daemon (``ingest.py``'s
``casewatch_pipeline``: sampling rate 0, tripwire and redaction as shipped) reads one topic of
``--messages`` turns: alone, with the outcome feed (feedback on every tenth turn, as
``ingest.py --outcomes``), and with the feed and every unsampled turn kept for feedback. The
contenders alternate for ``--rounds``; reported is each thread's median in microseconds of CPU
per turn read.

Every thread but the main one competes for the daemon's GIL, which bounds intake on two cores
(the broker and the keeper's process take a fraction of the second core): the differences
between the contenders' daemon threads are what the feed and the keeper cost intake. The window
is ``ingest.py``'s steady one, from the first turn counted to the last, per turn read in it; the
main thread (the bench's, which polls the daemon's counters) is left out.

    .venv/bin/python bench/ingest_threads.py [--messages 300000] [--rounds 2]

Prints a readable table, then one JSON line of results.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import threading
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ and tests/ are not installed packages
BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from ingest import (  # noqa: E402
    OUTCOMES_TOPIC,
    TOPIC,
    broker_with_topic,
    casewatch_pipeline,
    fill_outcomes,
    fill_topic,
    held_or_exit,
)

from monitor.runtime.logs import configure_logging  # noqa: E402

CONTENDERS = ("alone", "feed", "both")
TICK = os.sysconf("SC_CLK_TCK")
SNAP_S = 0.2


def _thread_cpu() -> dict[int, tuple[str, float]]:
    """This process's threads: native id -> (name, CPU seconds so far)."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    found: dict[int, tuple[str, float]] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/self/task/{tid}/comm") as f:
                comm = f.read().strip()
        except OSError:  # the thread ended meanwhile
            continue
        name = names.get(int(tid)) or comm
        found[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / TICK)
    return found


def _children_cpu() -> dict[int, tuple[str, float]]:
    found: dict[int, tuple[str, float]] = {}
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
            line = " ".join(child.cmdline())
        except psutil.Error:
            continue
        name = (
            "broker (tansu)"
            if "tansu" in line
            else "process: " + ("keeper / pool" if "multiprocessing" in line else child.name())
        )
        found[child.pid] = (name, times.user + times.system)
    return found


class Sampler:
    """CPU of every thread and child process over ``ingest.py``'s steady window: read when
    the window opens and when it closes (``mark``), and every ``SNAP_S`` between, so that a
    thread that ends within the window still counts (its CPU is lost with it)."""

    def __init__(self) -> None:
        self._first: dict[tuple[str, int], float] = {}
        self._last: dict[tuple[str, int], tuple[str, float]] = {}
        self._open = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._open.set()  # a daemon that failed before its window opened: the thread ends
        self._thread.join()

    def _read(self) -> dict[tuple[str, int], tuple[str, float]]:
        found = {("t", k): v for k, v in _thread_cpu().items()}
        found.update({("p", k): v for k, v in _children_cpu().items()})
        return found

    def mark(self, phase: str) -> None:
        """``ingest.casewatch_pipeline``'s ``on_window``: ``first``, then ``done``."""
        with self._lock:
            reading = self._read()
            if phase == "first":
                self._first = {k: v[1] for k, v in reading.items()}
                self._last = dict(reading)
                self._open.set()
            else:
                self._last.update(reading)
                self._stop.set()

    def _run(self) -> None:
        self._open.wait()
        while not self._stop.wait(SNAP_S):
            with self._lock:
                if not self._stop.is_set():
                    self._last.update(self._read())

    def per_group(self) -> dict[str, float]:
        """CPU seconds in the window by thread name (pool threads' numbers dropped) or process
        kind; a thread or process that began within the window counts from zero."""
        groups: dict[str, float] = {}
        for key, (name, cpu) in self._last.items():
            if name in ("MainThread", "bench-sampler"):
                continue
            group = re.sub(r"_\d+$", "", name)
            groups[group] = groups.get(group, 0.0) + cpu - self._first.get(key, 0.0)
        return groups


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    configure_logging("warning")
    timeout = 60 + args.messages / 1000
    per_round: dict[str, list[dict[str, float]]] = {c: [] for c in CONTENDERS}
    rates: dict[str, list[float]] = {c: [] for c in CONTENDERS}
    with broker_with_topic(2) as broker, tempfile.TemporaryDirectory() as tmp:
        fill_topic(broker.bootstrap, TOPIC, args.messages, partitions=2)
        n = held_or_exit(broker.bootstrap, TOPIC, args.messages)
        feedback = fill_outcomes(broker.bootstrap, args.messages, 10)
        feedback = held_or_exit(broker.bootstrap, OUTCOMES_TOPIC, feedback)
        for r in range(args.rounds):
            for name in CONTENDERS:
                with Sampler() as sampler:
                    result = casewatch_pipeline(
                        broker.bootstrap,
                        n,
                        timeout,
                        Path(tmp),
                        outcome_events=0 if name == "alone" else feedback,
                        retain=name == "both",
                        on_window=sampler.mark,
                    )
                steady = n - result["first_count"]
                per_round[name].append(
                    {k: v / steady * 1e6 for k, v in sampler.per_group().items()}
                )
                rates[name].append(result["steady"])
            print(
                f"  round {r + 1}: "
                + " | ".join(f"{c} {rates[c][-1]:8,.0f} turns/s" for c in CONTENDERS)
            )
    medians: dict[str, dict[str, float]] = {}
    for name in CONTENDERS:
        groups = sorted({g for rnd in per_round[name] for g in rnd})
        medians[name] = {
            g: round(statistics.median(rnd.get(g, 0.0) for rnd in per_round[name]), 2)
            for g in groups
        }
    everything = sorted(
        {g for m in medians.values() for g in m}, key=lambda g: -medians["both"].get(g, 0.0)
    )
    print(f"\nmicroseconds of CPU a turn read, median of {args.rounds} rounds, {n} turns")
    print(f"  {'thread or process':<34}" + "".join(f"{c:>9}" for c in CONTENDERS))
    for g in everything:
        row = [medians[c].get(g, 0.0) for c in CONTENDERS]
        if max(row) < 0.05:
            continue
        print(f"  {g:<34}" + "".join(f"{v:9.2f}" for v in row))
    print(
        "  steady turns/s (median)           "
        + "".join(f"{statistics.median(rates[c]):9,.0f}" for c in CONTENDERS)
    )
    print(
        json.dumps(
            {
                "bench": "ingest_threads",
                "messages": n,
                "rounds": args.rounds,
                "cpu_us_per_turn": medians,
                "steady_turns_per_second": {c: statistics.median(rates[c]) for c in CONTENDERS},
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
