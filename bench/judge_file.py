"""`casewatch judge` on a file with the offline heuristic judge: the batch's own overhead.

Judges ``--turns`` turns (examples/turns.jsonl repeated, with unique event ids) with the
command itself (``python -m monitor.cli judge IN --out ... --compact ... --json``, default
settings: the heuristic judge, redaction before judging) at ``--concurrency``, and reads the
throughput off its summary (the run, without the interpreter's start). Baseline, same run: the
same evaluator called on the same decoded turns by ``--concurrency`` bare threads, writing
nothing (the judge's own cost). ``--against DIR`` also runs the command of another checkout
(e.g. ``git archive main | tar -x -C /tmp/main``), interleaved, for a before/after ratio, in
turns per second and in CPU seconds per turn (the command's process, start included: on a
loaded machine the steadier of the two). Rounds alternate; medians of ``--rounds``.

    .venv/bin/python bench/judge_file.py [--turns 2000] [--concurrency 8] [--rounds 3]
                                         [--against DIR]

Prints a readable report, then one JSON line of results.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.batch_throughput import make_input  # noqa: E402
from monitor.config.settings import load_settings  # noqa: E402
from monitor.judging.evaluator import build_evaluator  # noqa: E402
from monitor.schema.turn import TurnEvent  # noqa: E402

EXAMPLES = ROOT / "examples" / "turns.jsonl"


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def command(tree: Path, src: Path, workdir: Path, concurrency: int) -> tuple[float, float]:
    """Turns per second of ``casewatch judge`` from checkout ``tree`` (by its summary), and
    the CPU seconds its process spent per turn."""
    out, compact = workdir / "granular.jsonl", workdir / "compact.jsonl"
    out.unlink(missing_ok=True)
    compact.unlink(missing_ok=True)
    args = [sys.executable, "-m", "monitor.cli", "judge", str(src), "--out", str(out)]
    args += ["--compact", str(compact), "--concurrency", str(concurrency), "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cpu_before = _children_cpu_s()
    done = subprocess.run(
        [*args, "--json"], cwd=tree, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"casewatch judge ({tree}) failed: {done.stderr[-2000:]}")
    cpu_s = _children_cpu_s() - cpu_before
    summary: dict[str, Any] = json.loads(done.stdout)
    return float(summary["turns_per_second"]), cpu_s / max(1, int(summary["judged"]))


def bare(lines: list[bytes], concurrency: int) -> float:
    """Turns per second of the heuristic evaluator alone on bare threads (decode included)."""
    evaluator = build_evaluator(load_settings(), concurrency=concurrency)
    try:
        started = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            turns = [TurnEvent.model_validate_json(line) for line in lines]
            list(pool.map(evaluator.evaluate, turns))
        return len(lines) / (time.perf_counter() - started)
    finally:
        evaluator.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against", type=Path, help="another checkout to measure beside")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        src = workdir / "turns.jsonl"
        lines = make_input(EXAMPLES, args.turns, src)
        ours: list[float] = []
        base: list[float] = []
        other: list[float] = []
        ours_cpu: list[float] = []
        other_cpu: list[float] = []
        for round_ in range(args.rounds):
            base.append(bare(lines, args.concurrency))
            rate, cpu = command(ROOT, src, workdir, args.concurrency)
            ours.append(rate)
            ours_cpu.append(cpu)
            said = f"round {round_ + 1}: bare {base[-1]:.0f}, casewatch judge {rate:.0f} turns/s"
            said += f" ({cpu * 1000:.1f} ms CPU/turn)"
            if args.against is not None:
                rate, cpu = command(args.against, src, workdir, args.concurrency)
                other.append(rate)
                other_cpu.append(cpu)
                said += f", against {rate:.0f} turns/s ({cpu * 1000:.1f} ms CPU/turn)"
            print(said)
    result: dict[str, Any] = {
        "bench": "judge_file",
        "turns": args.turns,
        "concurrency": args.concurrency,
        "bare_turns_per_s": round(statistics.median(base), 1),
        "judge_turns_per_s": round(statistics.median(ours), 1),
        "judge_cpu_ms_per_turn": round(statistics.median(ours_cpu) * 1000, 2),
        "ratio_vs_bare": round(
            statistics.median(o / b for o, b in zip(ours, base, strict=True)), 3
        ),
    }
    if other:
        result["against"] = str(args.against)
        result["against_turns_per_s"] = round(statistics.median(other), 1)
        result["against_cpu_ms_per_turn"] = round(statistics.median(other_cpu) * 1000, 2)
        result["ratio_vs_against"] = round(
            statistics.median(o / a for o, a in zip(ours, other, strict=True)), 3
        )
        result["cpu_ratio_vs_against"] = round(
            statistics.median(o / a for o, a in zip(ours_cpu, other_cpu, strict=True)), 3
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
