"""CPU per turn on the ingest path, this checkout against another one, steady under load.

``ingest.py`` reports a ratio of wall-clock rates, which a shared machine moves by more than a
change to the pipeline costs. This measures what the daemon spends per turn in CPU time
(``time.process_time``: every thread of the process, and only of this process), in process
and without a broker: the real ``Daemon`` (``stream_daemon``) with the settings of
``ingest.py``'s casewatch contender (sampling rate 0, the identifier tripwire and redaction as
shipped, no screening process), over an in-memory source that hands out prepared ``RawMessage``
records (what casewatch's record reader returns) in polls of 500, timed from its first poll to
the poll that finds it empty: poll, track, decode + validate, redact, tripwire, sample, commit.
The source is ``pipeline_cost.py``'s, from the checkout measured.

Each checkout runs in a subprocess of its own (its own imports: ``--against`` a worktree of
another commit, e.g. ``git worktree add /tmp/old <commit>``), alternated ``--rounds`` times;
each subprocess times ``--runs`` daemons and reports their median. Also timed per checkout:
one ``collect()`` of the daemon's metrics registry, which ``ingest.py``'s main thread runs
every 50 ms beside the daemon (on the same GIL). ``--profile DIR`` writes one cProfile of a
daemon run per checkout there and prints where each spends its time.

    .venv/bin/python bench/ingest_profile.py --against /tmp/old [--messages 20000] [--runs 5]
        [--rounds 3] [--profile DIR]
    .venv/bin/python bench/ingest_profile.py --against /tmp/old --instructions --messages 1000

``--instructions`` counts instructions instead, under valgrind's callgrind (the same count on
a loaded machine as on a quiet one): one daemon over ``--messages`` turns per checkout, counted
from its first poll to the poll that finds the source empty (callgrind's client requests,
through a ten-line library compiled with ``cc``; the rest runs uninstrumented). Minutes each.

Prints a readable report, then one JSON line of results.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
POLL_RECORDS = 500  # ingest.py's max_poll_records
WARM_UP = 1000  # turns through one daemon before any is timed


def _worker(
    tree: Path, messages: int, runs: int, profile: Path | None, marks: Path | None = None
) -> dict[str, Any]:
    """Runs in the subprocess of ``tree``: its modules first on the path, then imported.
    ``marks``: the library (``_MARKS``) that has callgrind count the first timed run's loop."""
    sys.path.insert(0, str(tree))
    import ctypes

    from prometheus_client import CollectorRegistry

    import monitor
    from bench.ingest import bench_settings
    from bench.pipeline_cost import (  # the in-memory source and sinks of that checkout
        PARTITIONS,
        TOPIC,
        _IdleStore,
        _MemorySource,
        _NoDeadLetters,
        kafka_records,
    )
    from consumers._kafka_records import to_raw
    from consumers.records import RawMessage, TopicPartition
    from monitor.judging.evaluator import build_evaluator
    from monitor.metrics.exporter import Metrics
    from monitor.runtime.clock import SystemClock
    from monitor.runtime.logs import configure_logging
    from monitor.stream.prepare import stream_sampler
    from monitor.stream.runner import stream_daemon

    if Path(monitor.__file__).resolve().parent.parent != tree.resolve():
        raise SystemExit(f"imported {monitor.__file__}, not the checkout {tree}")
    configure_logging("warning")
    all_raws = [to_raw(r) for r in kafka_records(messages - messages % PARTITIONS)]
    warm_raws = [to_raw(r) for r in kafka_records(WARM_UP)]

    class TimedSource(_MemorySource):
        """Prepared records; the CPU clock read at the first poll and at the first empty one."""

        def __init__(self, raws: list[RawMessage], counted: Any = None) -> None:
            super().__init__([])
            self.raws = raws
            self.cpu: list[float] = []
            self.counted = counted  # callgrind's marks, called with the CPU clock

        def poll(
            self, timeout_s: float, max_records: int, *, join_limit_s: float | None = None
        ) -> list[RawMessage]:
            batch = self.raws[self._at : self._at + max_records]
            self._at += len(batch)
            if (not self.cpu and batch) or (len(self.cpu) == 1 and not batch):
                if self.counted is not None:
                    (self.counted.cg_stop if self.cpu else self.counted.cg_start)()
                self.cpu.append(time.process_time())
            return batch

    def one_run(workdir: Path, raws: list[RawMessage], counted: Any = None) -> tuple[float, float]:
        settings = bench_settings(
            "localhost:9",
            workdir / "unused.db",
            sampling={"default_rate": 0.0, "identifier_tripwire": True},
            daemon={"screen_processes": 0},
        )
        assert settings.kafka.max_poll_records == POLL_RECORDS
        registry = CollectorRegistry()
        source = TimedSource(raws, counted)
        evaluator = build_evaluator(settings, concurrency=settings.daemon.concurrency)
        daemon = stream_daemon(
            settings,
            source,
            _NoDeadLetters(),
            _IdleStore(),  # type: ignore[arg-type]
            evaluator,
            Metrics(registry),
            stream_sampler(settings, SystemClock()),
            exit_when_idle=True,
        )
        daemon.run()
        evaluator.close()
        expected = {TopicPartition(TOPIC, p): len(raws) // PARTITIONS for p in range(PARTITIONS)}
        if source.committed != expected:
            raise SystemExit(f"committed {source.committed}, expected {expected}")
        started = time.process_time()
        for _ in range(20):  # as ingest.py's value(): every sample of every family
            sum(s.value for f in registry.collect() for s in f.samples)
        collect_us = (time.process_time() - started) / 20 * 1e6
        return (source.cpu[1] - source.cpu[0]) / len(raws) * 1e6, collect_us

    with tempfile.TemporaryDirectory() as tmp:
        one_run(Path(tmp), warm_raws)  # warm-up: imports, caches, compiled patterns
        counted = None if marks is None else ctypes.CDLL(str(marks))
        timed = [one_run(Path(tmp), all_raws, counted if i == 0 else None) for i in range(runs)]
        if profile is not None:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
            one_run(Path(tmp), all_raws)
            profiler.disable()
            profiler.dump_stats(str(profile))
    return {
        "cpu_us_per_turn": statistics.median(t[0] for t in timed),
        "best_cpu_us_per_turn": min(t[0] for t in timed),
        "runs_cpu_us_per_turn": [round(t[0], 2) for t in timed],
        "collect_us": statistics.median(t[1] for t in timed),
    }


def _run_checkout(
    tree: Path, messages: int, runs: int, profile: Path | None = None
) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--worker", str(tree), "--messages", str(messages)]
    cmd += ["--runs", str(runs)]
    if profile is not None:
        cmd += ["--profile", str(profile)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, cwd=tree)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# Callgrind's client requests, called through ctypes by the worker: instructions are counted
# (and the program instrumented, hence slowed down) only from the first poll of the timed run to
# the poll that finds the source empty.
_MARKS = """
#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void cg_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
"""


def _instructions(tree: Path, messages: int) -> int:
    """Instructions the daemon of ``tree`` executes over ``messages`` turns (callgrind's count:
    the same on a loaded machine as on a quiet one). Needs valgrind and a C compiler."""
    with tempfile.TemporaryDirectory() as tmp:
        lib = Path(tmp) / "marks.so"
        (Path(tmp) / "marks.c").write_text(_MARKS)
        compile_cmd = ["cc", "-shared", "-fPIC", "-O1", "-o", str(lib), f"{tmp}/marks.c"]
        subprocess.run(compile_cmd, check=True)
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no"]
        cmd += [f"--callgrind-out-file={tmp}/out", sys.executable, __file__]
        cmd += ["--worker", str(tree), "--messages", str(messages), "--runs", "1"]
        cmd += ["--marks", str(lib)]
        env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
        out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, cwd=tree)
    for line in out.stderr.splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1])
    raise SystemExit(f"no instruction count from callgrind:\n{out.stderr[-2000:]}")


def _top(path: Path, n: int = 18) -> None:
    import pstats

    stats = pstats.Stats(str(path))
    stats.sort_stats("tottime").print_stats(n)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, help="another checkout (a git worktree)")
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5, help="daemons timed per subprocess")
    parser.add_argument("--rounds", type=int, default=3, help="subprocesses per checkout")
    parser.add_argument("--profile", type=Path, help="a directory for one cProfile each")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="instead: instructions per turn under valgrind's callgrind, one daemon over "
        "--messages turns per checkout (minutes each)",
    )
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--marks", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        result = _worker(args.worker, args.messages, args.runs, args.profile, args.marks)
        print(json.dumps(result))
        return 0
    trees = {"this": ROOT}
    if args.against is not None:
        trees = {"against": args.against.resolve(), "this": ROOT}
    if args.instructions:
        per_turn = {}
        for name, tree in trees.items():
            per_turn[name] = round(_instructions(tree, args.messages) / args.messages)
            print(f"{name} ({tree}): {per_turn[name]:,} instructions per turn")
        result: dict[str, Any] = {"bench": "ingest_profile", "instructions_per_turn": per_turn}
        if "against" in per_turn:
            result["ratio_this_to_against"] = round(per_turn["this"] / per_turn["against"], 4)
        print(json.dumps(result))
        return 0
    load_before = os.getloadavg()
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for r in range(args.rounds):
        for name, tree in trees.items():
            rounds[name].append(_run_checkout(tree, args.messages, args.runs))
        print(
            f"  round {r + 1}: "
            + " | ".join(
                f"{name} ({trees[name]}) {rounds[name][-1]['cpu_us_per_turn']:.2f} us CPU/turn "
                f"(best {rounds[name][-1]['best_cpu_us_per_turn']:.2f}), "
                f"collect {rounds[name][-1]['collect_us']:.0f} us"
                for name in trees
            )
        )
    load_after = os.getloadavg()
    med = {
        name: {
            key: statistics.median(x[key] for x in rounds[name])
            for key in ("cpu_us_per_turn", "best_cpu_us_per_turn", "collect_us")
        }
        for name in trees
    }
    print(
        f"median of {args.rounds} rounds x {args.runs} runs, {args.messages} turns each: "
        + "; ".join(
            f"{name} {med[name]['cpu_us_per_turn']:.2f} us CPU/turn (best of each subprocess: "
            f"{med[name]['best_cpu_us_per_turn']:.2f}), registry collect "
            f"{med[name]['collect_us']:.0f} us"
            for name in trees
        )
        + f" (load average {load_before[0]:.1f} before, {load_after[0]:.1f} after)"
    )
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
        for name, tree in trees.items():
            path = args.profile / f"{name}.prof"
            _run_checkout(tree, args.messages, 1, path)
            print(f"--- {name} ({tree}): top functions by own time, one run ({path})")
            _top(path)
    result: dict[str, Any] = {
        "bench": "ingest_profile",
        "messages": args.messages,
        "runs": args.runs,
        "rounds": args.rounds,
        "load_average": [round(load_before[0], 2), round(load_after[0], 2)],
        **{f"{name}_tree": str(tree) for name, tree in trees.items()},
        **{f"{name}_{key}": round(value, 2) for name in trees for key, value in med[name].items()},
        **{
            f"rounds_{name}_cpu_us_per_turn": [round(x["cpu_us_per_turn"], 2) for x in rounds[name]]
            for name in trees
        },
    }
    if "against" in med:
        result["ratio_this_to_against"] = round(
            med["this"]["cpu_us_per_turn"] / med["against"]["cpu_us_per_turn"], 3
        )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
