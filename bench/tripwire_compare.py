"""The identifier tripwire against another version of it, in the same run.

A change to ``monitor/judging/heuristic/tripwire.py`` is timed against the file it replaces
(``--against``, e.g. main's, written out with ``git show``), loaded beside it as a second
module: pipeline_cost's in-memory daemon loop with the tripwire off, the other one and this
one, interleaved round by round (each order in turn), and each tripwire alone on freshly
decoded turns (their strings not hashed yet, as on the ingest path). CPU time of this thread,
medians of ``--repeat``. Both must decide alike on the turns timed, or it stops.

    git show main:monitor/judging/heuristic/tripwire.py > /tmp/tripwire_main.py
    .venv/bin/python bench/tripwire_compare.py --against /tmp/tripwire_main.py [--repeat 9]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ is not an installed package

import monitor.stream.turn_steps as turn_steps  # noqa: E402
from bench.ingest import turn_bytes  # noqa: E402
from bench.pipeline_cost import (  # noqa: E402
    PARTITIONS,
    daemon_us_per_msg,
    example_values,
    kafka_records,
)
from monitor.judging.heuristic import tripwire  # noqa: E402
from monitor.runtime.logs import configure_logging  # noqa: E402
from monitor.schema.turn import TurnEvent  # noqa: E402

Tripwire = Callable[[TurnEvent], Any]


def load(path: Path) -> Tripwire:
    spec = importlib.util.spec_from_file_location("tripwire_against", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    fn: Tripwire = module.identifier_tripwire
    return fn


def _cpu_us(records: list[Any], workdir: Path, fn: Tripwire | None) -> float:
    if fn is not None:
        vars(turn_steps)["identifier_tripwire"] = fn  # the daemon binds it when it is built
    start = time.thread_time()
    daemon_us_per_msg(records, workdir, tripwire=fn is not None)
    return (time.thread_time() - start) / len(records) * 1e6


def _alone_us(values: list[bytes], fn: Tripwire) -> float:
    turns = [TurnEvent.model_validate_json(v) for v in values]
    start = time.thread_time()
    for turn in turns:
        fn(turn)
    return (time.thread_time() - start) / len(turns) * 1e6


def compare(
    values: list[bytes], workdir: Path, other: Tripwire, repeat: int
) -> dict[str, dict[str, float]]:
    this: Tripwire = tripwire.identifier_tripwire
    for v in values[:2000]:
        turn = TurnEvent.model_validate_json(v)
        a, b = other(turn), this(turn)
        if (a.misses, a.truncated) != (b.misses, b.truncated):
            raise SystemExit(f"{turn.event_id}: {a} against {b}")
    records = kafka_records(len(values), values)
    ways: dict[str, Tripwire | None] = {
        "off": None,
        "against": other,
        "this": this,
    }
    loop: dict[str, list[float]] = {k: [] for k in ways}
    alone: dict[str, list[float]] = {k: [] for k in ways if k != "off"}
    names = list(ways)
    for name in names:  # warm-up, untimed: each version's caches filled once
        _cpu_us(records, workdir, ways[name])
    for r in range(repeat):
        for name in names[r % 3 :] + names[: r % 3]:
            loop[name].append(_cpu_us(records, workdir, ways[name]))
            fn = ways[name]
            if fn is not None:
                alone[name].append(_alone_us(values, fn))
    vars(turn_steps)["identifier_tripwire"] = tripwire.identifier_tripwire
    off = statistics.median(loop["off"])
    out: dict[str, dict[str, float]] = {"off": {"loop_us_per_msg": round(off, 2)}}
    for name in alone:
        on = statistics.median(loop[name])
        out[name] = {
            "loop_us_per_msg": round(on, 2),
            "ratio_to_off": round(on / off, 2),
            "us_per_turn": round(on - off, 2),
            "alone_us_per_turn": round(statistics.median(alone[name]), 2),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--against", type=Path, required=True, help="another tripwire.py")
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--example-messages", type=int, default=3_000)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args(argv)
    configure_logging("warning")
    other = load(args.against)
    n = args.messages - args.messages % PARTITIONS
    n_examples = args.example_messages - args.example_messages % PARTITIONS
    examples = example_values()
    sets = {
        "synthetic": [turn_bytes(i) for i in range(n)],
        "examples": [examples[i % len(examples)] for i in range(n_examples)],
    }
    result: dict[str, Any] = {"bench": "tripwire_compare", "repeat": args.repeat}
    with tempfile.TemporaryDirectory() as tmp:
        for name, values in sets.items():
            r = compare(values, Path(tmp), other, args.repeat)
            result[name] = r
            print(f"{name}: loop off {r['off']['loop_us_per_msg']:.2f} us/msg (CPU, medians)")
            for way in ("against", "this"):
                w = r[way]
                print(
                    f"  {way:8s} loop {w['loop_us_per_msg']:.2f} us/msg = "
                    f"{w['ratio_to_off']:.2f}x, +{w['us_per_turn']:.2f} us/turn; "
                    f"alone {w['alone_us_per_turn']:.2f} us/turn"
                )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
