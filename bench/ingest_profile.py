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
    .venv/bin/python bench/ingest_profile.py --against /tmp/old --instructions --screen
    .venv/bin/python bench/ingest_profile.py --against /tmp/old --instructions --outcomes

``--instructions`` counts instructions instead, under valgrind's callgrind (the same count on
a loaded machine as on a quiet one): one daemon over ``--messages`` turns per checkout, counted
from its first poll to the poll that finds the source empty (callgrind's client requests,
through a ten-line library compiled with ``cc``; the rest runs uninstrumented). Minutes each.

``--screen`` measures the path with a screening process (``daemon.screen_processes: 1``,
``monitor/stream/steps/screen.py``) instead, in one process: the step's process pool is
replaced by one that runs each batch at once, in this process, through what the pool's
processes would do with it (the batch and its marks pickled there and back, the pool's
initializer run once over its pickled arguments), so a checkout's own screening function, the
decisions it is given and the consumer's handling of the marks are what is timed or counted.
Under ``--instructions`` the count is split by callgrind dumps into the consumer's thread
(``loop``), the hand-off (pickling a batch out and its marks back, in the daemon's process),
the screening process's work on the batches (``screen``: unpickling a batch, the screening
function, pickling its marks) and the pool's start (``setup``, once, left out of the total).
One process holds both sides, so the garbage collector's passes (one heap, the daemon's) fall
in whichever part allocates when one is due: the parts move by a few hundred instructions a
turn from run to run, their sum much less (a few dozen at 6,000 turns).
Works on checkouts from before the modules moved (``monitor/clock.py``, ``monitor/exporter.py``).

``--outcomes`` measures ``ingest.py --outcomes``' last contender instead: the outcome feed (a
topic of kind outcomes, negative feedback on every tenth turn, its records after each tenth
turn's) and every unsampled turn kept for feedback (``outcomes.retain_unsampled``), into a real
SQLite file per daemon; the count (or the clock) stops at the empty poll only once the keeper's
writer thread has written every turn, so its work is in (a run whose keeper dropped turns,
its queue full because the in-memory source outran its writer, ends with an error saying so:
fewer ``--messages``, e.g. 8,000, fit). Under ``--instructions`` the count is
split by thread (callgrind's ``--separate-threads``): the consumer's (``loop``) and the rest of
the daemon's (``writers``: the keeper's and the outcome step's writer threads), per turn read.

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


def _first_of(modules: tuple[str, ...], name: str) -> Any:
    """``name`` from the first of ``modules`` the checkout has."""
    import importlib

    for module in modules:
        try:
            return getattr(importlib.import_module(module), name)
        except ModuleNotFoundError:
            continue
    raise SystemExit(f"none of {modules} in this checkout")


# The callgrind marks of the run being counted (``_worker``), for the inline pool's dumps.
marks_of: dict[str, Any] = {}
# Records the inline pool screened and how many of them it finished (a mark other than None).
screened = {"records": 0, "finished": 0}


def _dump(part: str) -> None:
    """Close the counted part that ends here (``loop``, ``handoff``, ``screen``, ``setup``)."""
    lib = marks_of.get("lib")
    if lib is not None:
        lib.cg_dump(part.encode())


def _inline_pool() -> None:
    """Replace the screening step's process pool with one that screens each batch at once in
    this process, as a pool process would: the initializer over its pickled arguments (once),
    then per batch the call pickled out, unpickled and run, and its marks pickled back. The
    step's module, whichever the checkout's, reaches the pool as ``cf.ProcessPoolExecutor``."""
    import concurrent.futures as cf
    import pickle
    import types
    from multiprocessing.reduction import ForkingPickler  # what the pool's queues pickle with

    from monitor.stream.steps import screen as screen_module

    class InlinePool:
        def __init__(
            self, max_workers: int, *, mp_context: Any, initializer: Any, initargs: Any
        ) -> None:
            _dump("loop")
            args = pickle.loads(ForkingPickler.dumps(initargs))  # noqa: S301
            initializer(*args)
            _dump("setup")

        def submit(self, fn: Any, *args: Any) -> cf.Future[Any]:
            _dump("loop")
            sent = ForkingPickler.dumps((fn, args))  # the daemon's process
            _dump("handoff")
            call, call_args = pickle.loads(sent)  # noqa: S301 - the screening process
            marks = call(*call_args)
            back = ForkingPickler.dumps(marks)
            _dump("screen")
            screened["records"] += len(marks)
            screened["finished"] += sum(mark is not None for mark in marks)
            future: cf.Future[Any] = cf.Future()
            future.set_result(pickle.loads(back))  # noqa: S301 - the daemon's process
            _dump("handoff")
            return future

        def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
            return None

    names = {k: v for k, v in vars(cf).items() if not k.startswith("__")}
    names["ProcessPoolExecutor"] = InlinePool
    screen_module.cf = types.SimpleNamespace(**names)  # type: ignore[assignment,attr-defined]


OUTCOMES_TOPIC = "bench.outcomes"  # ingest.py's
FEEDBACK_EVERY = 10  # ingest.py --outcomes: negative feedback on every tenth turn


def _with_outcomes() -> dict[str, int]:
    """Count the rows the checkout's keeper writes (``RetainingDone._write``), so a timed run
    ends once its writer thread has kept every turn."""
    from monitor.stream.steps.retain import RetainingDone

    kept = {"rows": 0, "dropped": 0}
    write = RetainingDone._write
    drop = RetainingDone._drop

    def counted_drop(self: Any) -> None:
        drop(self)
        kept["dropped"] += 1

    def counted_write(self: Any, batch: list[Any], *places: list[Any]) -> None:
        # ``places``: the places queued apart (checkouts that keep them a batch at a time).
        write(self, batch, *places)
        kept["rows"] += len(batch) + sum(len(p) for p in places)

    RetainingDone._write = counted_write  # type: ignore[method-assign]
    RetainingDone._drop = counted_drop  # type: ignore[method-assign]
    return kept


def _with_feedback(raws: list[Any]) -> list[Any]:
    """``raws`` with ``ingest.py``'s negative feedback on every tenth turn, each on the
    outcomes topic after its turn's tenth."""
    from bench.ingest import outcome_bytes
    from consumers.records import RawMessage

    out: list[Any] = []
    for i, raw in enumerate(raws):
        out.append(raw)
        if i % FEEDBACK_EVERY == FEEDBACK_EVERY - 1:
            offset = i // FEEDBACK_EVERY
            value = outcome_bytes(i - FEEDBACK_EVERY + 1)
            out.append(RawMessage(OUTCOMES_TOPIC, 0, offset, value))
    return out


def _worker(
    tree: Path,
    messages: int,
    runs: int,
    profile: Path | None,
    marks: Path | None = None,
    screen: bool = False,
    outcomes: bool = False,
) -> dict[str, Any]:
    """Runs in the subprocess of ``tree``: its modules first on the path, then imported.
    ``marks``: the library (``_MARKS``) that has callgrind count the first timed run's loop.
    ``screen``: with a screening process, run inline (``_inline_pool``).
    ``outcomes``: with the outcome feed and unsampled turns kept (``_with_outcomes``)."""
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
    from monitor.stream.prepare import stream_sampler
    from monitor.stream.runner import stream_daemon

    # Where the checkout has them: monitor/runtime/, monitor/metrics/ since the modules moved.
    Metrics = _first_of(("monitor.metrics.exporter", "monitor.exporter"), "Metrics")
    SystemClock = _first_of(("monitor.runtime.clock", "monitor.clock"), "SystemClock")
    configure_logging = _first_of(("monitor.runtime.logs", "monitor.logs"), "configure_logging")

    if Path(monitor.__file__).resolve().parent.parent != tree.resolve():
        raise SystemExit(f"imported {monitor.__file__}, not the checkout {tree}")
    if screen:
        _inline_pool()
    configure_logging("warning")
    all_raws = [to_raw(r) for r in kafka_records(messages - messages % PARTITIONS)]
    warm_raws = [to_raw(r) for r in kafka_records(WARM_UP)]
    kept = _with_outcomes() if outcomes else None
    if outcomes:
        all_raws, warm_raws = _with_feedback(all_raws), _with_feedback(warm_raws)

    class TimedSource(_MemorySource):
        """Prepared records; the CPU clock read at the first poll and at the first empty one."""

        def __init__(self, raws: list[RawMessage], counted: Any = None) -> None:
            super().__init__([])
            self.raws = raws
            self.cpu: list[float] = []
            self.counted = counted  # callgrind's marks, called with the CPU clock
            self.turns = sum(raw.topic == TOPIC for raw in raws)

        def assignment(self) -> set[TopicPartition]:
            feed = {TopicPartition(OUTCOMES_TOPIC, 0)} if outcomes else set()
            return {TopicPartition(TOPIC, p) for p in range(PARTITIONS)} | feed

        def poll(
            self, timeout_s: float, max_records: int, *, join_limit_s: float | None = None
        ) -> list[RawMessage]:
            batch = self.raws[self._at : self._at + max_records]
            self._at += len(batch)
            if kept is not None and len(self.cpu) == 1 and not batch:
                # The keeper's writer's work counts too. A turn its full queue refused is
                # never written: waiting for it would never end.
                while kept["rows"] + kept["dropped"] < self.turns:
                    time.sleep(0.005)
                if kept["dropped"]:
                    raise SystemExit(
                        f"the keeper dropped {kept['dropped']} of {self.turns} turns (its "
                        "queue was full: the in-memory source outruns its writer); the "
                        "figure would leave their cost out: use fewer --messages"
                    )
            if (not self.cpu and batch) or (len(self.cpu) == 1 and not batch):
                if self.counted is not None:
                    if self.cpu:
                        _dump("loop")
                        marks_of.clear()
                        self.counted.cg_stop()
                    else:
                        self.counted.cg_start()
                        marks_of["lib"] = self.counted
                self.cpu.append(time.process_time())
            return batch

    def one_run(workdir: Path, raws: list[RawMessage], counted: Any = None) -> tuple[float, float]:
        extra: dict[str, Any] = {}
        store: Any = _IdleStore()
        if outcomes:
            from bench.ingest import kafka_section
            from monitor.storage.store import Store

            topics = [TOPIC, {"name": OUTCOMES_TOPIC, "kind": "outcomes"}]
            extra["kafka"] = {**kafka_section("localhost:9"), "topics": topics}
            extra["outcomes"] = {"retain_unsampled": True}
            from monitor.config.outcomes import OutcomesConfig

            if "retain_process" in OutcomesConfig.model_fields:
                # What this process does to keep them: the keeper's own process is not counted.
                extra["outcomes"]["retain_process"] = False
            store = Store(f"sqlite:///{workdir / f'{time.monotonic_ns()}.db'}")
            store.migrate()
            assert kept is not None
            kept["rows"] = kept["dropped"] = 0
        settings = bench_settings(
            "localhost:9",
            workdir / "unused.db",
            sampling={"default_rate": 0.0, "identifier_tripwire": True},
            daemon={"screen_processes": 1 if screen else 0},
            **extra,
        )
        assert settings.kafka.max_poll_records == POLL_RECORDS
        registry = CollectorRegistry()
        source = TimedSource(raws, counted)
        evaluator = build_evaluator(settings, concurrency=settings.daemon.concurrency)
        daemon = stream_daemon(
            settings,
            source,
            _NoDeadLetters(),
            store,
            evaluator,
            Metrics(registry),
            stream_sampler(settings, SystemClock()),
            exit_when_idle=True,
        )
        before = dict(screened)
        daemon.run()
        evaluator.close()
        turns = source.turns
        if screen and screened["finished"] - before["finished"] != turns:
            raise SystemExit(f"screening finished {screened} of {turns} turns")
        expected = {TopicPartition(TOPIC, p): turns // PARTITIONS for p in range(PARTITIONS)}
        if outcomes:
            daemon.close()  # the keeper's writer thread, and the outcome step's
            store.close()
            expected[TopicPartition(OUTCOMES_TOPIC, 0)] = len(raws) - turns
        if source.committed != expected:
            raise SystemExit(f"committed {source.committed}, expected {expected}")
        started = time.process_time()
        for _ in range(20):  # as ingest.py's value(): every sample of every family
            sum(s.value for f in registry.collect() for s in f.samples)
        collect_us = (time.process_time() - started) / 20 * 1e6
        return (source.cpu[1] - source.cpu[0]) / turns * 1e6, collect_us

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
    tree: Path,
    messages: int,
    runs: int,
    profile: Path | None = None,
    screen: bool = False,
    outcomes: bool = False,
) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--worker", str(tree), "--messages", str(messages)]
    cmd += ["--runs", str(runs)] + (["--screen"] if screen else [])
    cmd += ["--outcomes"] if outcomes else []
    if profile is not None:
        cmd += ["--profile", str(profile)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(cmd, env=env, check=False, capture_output=True, text=True, cwd=tree)
    if out.returncode != 0:
        raise SystemExit(f"{tree}: the measuring subprocess failed: {out.stderr.strip()[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# Callgrind's client requests, called through ctypes by the worker: instructions are counted
# (and the program instrumented, hence slowed down) only from the first poll of the timed run to
# the poll that finds the source empty.
_MARKS = """
#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void cg_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
void cg_dump(const char *part) { CALLGRIND_DUMP_STATS_AT(part); }
"""


def _instructions(
    tree: Path, messages: int, screen: bool = False, outcomes: bool = False
) -> dict[str, int]:
    """Instructions the daemon of ``tree`` executes over ``messages`` turns (callgrind's count:
    the same on a loaded machine as on a quiet one), as ``{"total": n}``; with ``screen`` also
    by part (``_inline_pool``), the pool's start (``setup``) left out of the total; with
    ``outcomes`` also by thread (``loop``: the consumer's, ``writers``: the others). Needs
    valgrind and a C compiler."""
    with tempfile.TemporaryDirectory() as tmp:
        lib = Path(tmp) / "marks.so"
        (Path(tmp) / "marks.c").write_text(_MARKS)
        compile_cmd = ["cc", "-shared", "-fPIC", "-O1", "-o", str(lib), f"{tmp}/marks.c"]
        subprocess.run(compile_cmd, check=True)
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no"]
        cmd += ["--separate-threads=yes"] if outcomes else []
        cmd += [f"--callgrind-out-file={tmp}/out", sys.executable, __file__]
        cmd += ["--worker", str(tree), "--messages", str(messages), "--runs", "1"]
        cmd += ["--marks", str(lib)] + (["--screen"] if screen else [])
        cmd += ["--outcomes"] if outcomes else []
        env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
        out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, cwd=tree)
        parts = _by_thread(Path(tmp)) if outcomes else _dumped_parts(Path(tmp))
    for line in out.stderr.splitlines():
        if "Collected :" in line:
            collected = int(line.rsplit(":", 1)[1])
            if not parts:
                return {"total": collected}
            if sum(parts.values()) != collected:
                raise SystemExit(f"parts {parts} do not add up to {collected:,}")
            return {"total": collected - parts.get("setup", 0), **parts}
    raise SystemExit(f"no instruction count from callgrind:\n{out.stderr[-2000:]}")


def _by_thread(directory: Path) -> dict[str, int]:
    """Instructions of the consumer's thread (``loop``: the first, which runs the daemon) and
    of the others (``writers``), from callgrind's files per thread (``out[.N]-TT``)."""
    parts = {"loop": 0, "writers": 0}
    for path in directory.glob("out*-*"):
        thread = int(path.name.rsplit("-", 1)[1])
        for line in path.read_text(errors="replace").splitlines():
            # A file's own count; its ``summary:`` is the thread's since an earlier dump.
            if line.startswith("totals:"):
                parts["loop" if thread == 1 else "writers"] += int(line.split()[1])
                break
    return parts


def _dumped_parts(directory: Path) -> dict[str, int]:
    """Instructions per part from callgrind's dumps (``_dump``'s labels), summed."""
    parts: dict[str, int] = {}
    for path in directory.glob("out*"):
        part, count = None, 0
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("desc: Trigger: "):
                # ``_dump``'s label; what follows the last one (returning from the mark that
                # stops the count) is dumped at the program's end and counted with the loop.
                trigger = line.removeprefix("desc: Trigger: ").strip()
                part = trigger.removeprefix("Client Request: ") if "Request" in trigger else "loop"
            elif line.startswith(("summary:", "totals:")):
                count = int(line.split()[1])
        if part is not None:
            parts[part] = parts.get(part, 0) + count
    return parts


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
    parser.add_argument(
        "--screen",
        action="store_true",
        help="with a screening process (daemon.screen_processes: 1), run inline in the "
        "daemon's process; --instructions splits the count by part",
    )
    parser.add_argument(
        "--outcomes",
        action="store_true",
        help="with the outcome feed and every unsampled turn kept for feedback, as ingest.py "
        "--outcomes' last contender; --instructions splits the count by thread",
    )
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--marks", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        result = _worker(
            args.worker,
            args.messages,
            args.runs,
            args.profile,
            args.marks,
            args.screen,
            args.outcomes,
        )
        print(json.dumps(result))
        return 0
    trees = {"this": ROOT}
    if args.against is not None:
        trees = {"against": args.against.resolve(), "this": ROOT}
    if args.instructions:
        per_turn = {}
        by_part: dict[str, dict[str, int]] = {}
        for name, tree in trees.items():
            counted = _instructions(tree, args.messages, args.screen, args.outcomes)
            per_turn[name] = round(counted["total"] / args.messages)
            parts = {k: round(v / args.messages) for k, v in counted.items() if k != "total"}
            by_part[name] = parts
            print(
                f"{name} ({tree}): {per_turn[name]:,} instructions per turn"
                + "".join(f"; {k} {v:,}" for k, v in sorted(parts.items()))
            )
        result: dict[str, Any] = {
            "bench": "ingest_profile",
            "screen": args.screen,
            "outcomes": args.outcomes,
            "instructions_per_turn": per_turn,
        }
        if args.screen or args.outcomes:
            result["instructions_per_turn_by_part"] = by_part
        if "against" in per_turn:
            result["ratio_this_to_against"] = round(per_turn["this"] / per_turn["against"], 4)
        print(json.dumps(result))
        return 0
    load_before = os.getloadavg()
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for r in range(args.rounds):
        for name, tree in trees.items():
            rounds[name].append(
                _run_checkout(tree, args.messages, args.runs, None, args.screen, args.outcomes)
            )
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
            _run_checkout(tree, args.messages, 1, path, args.screen, args.outcomes)
            print(f"--- {name} ({tree}): top functions by own time, one run ({path})")
            _top(path)
    result: dict[str, Any] = {
        "bench": "ingest_profile",
        "screen": args.screen,
        "outcomes": args.outcomes,
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
