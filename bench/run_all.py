"""Run every benchmark of bench/ and print one table of their headline figures.

Each script runs in its own process (as ``make bench`` would run it alone), prints its report
and ends with one JSON line; this collects those lines, prints a table, and writes them all to
``--json`` when given. Exit code 1 if a benchmark failed to run or produced no JSON line. A
figure below its target is reported in the table, not turned into a failure: the targets are
ratios against baselines measured in the same run on whatever machine this is.

    .venv/bin/python bench/run_all.py [--only ingest,judging] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 600

Row = tuple[str, str, str]  # figure, target, met?


def _yes(ok: Any) -> str:
    return "yes" if ok else "NO"


def _ingest(r: dict[str, Any]) -> Row:
    return (
        f"{r['casewatch_msgs_per_second']:,} vs plain consumer "
        f"{r['plain_consumer_msgs_per_second']:,} msgs/s = "
        f"{r['casewatch_ratio_to_plain_consumer']:.2f}; with screen_processes 1 "
        f"{r['screened_ratio_to_plain_consumer']:.2f}; CPU {r['casewatch_cpu_us_per_msg']} vs "
        f"{r['plain_cpu_us_per_msg']} us/msg, {r['casewatch_cores_at_plain_rate']} cores at the "
        f"plain rate (fetch wait {r['fetch_max_wait_ms']} ms, crc32c: {r['crc32c']})",
        ">= 0.90",
        _yes(r["meets_target"]),
    )


def _judging(r: dict[str, Any]) -> Row:
    return (
        f"{r['casewatch_turns_per_second']} turns/s = {r['casewatch_ratio_to_ideal']:.2f} of ideal "
        f"{r['ideal_turns_per_second']:.0f} = {r['median_casewatch_ratio_to_bare_client']:.2f} of "
        f"the bare client (itself {r['bare_client_ratio_to_ideal']:.2f} of ideal)",
        ">= 0.95 of ideal, >= 0.98 of bare",
        _yes(r["meets_target"]),
    )


def _memory(r: dict[str, Any]) -> Row:
    done = "worked through" if r.get("worked_through") else "NOT worked through"
    low, high = r["slope_ci95_low_mb_per_10k"], r["slope_ci95_high_mb_per_10k"]
    ci = f" (95 % CI {low:+.3f} to {high:+.3f})"
    return (
        f"peak {r['peak_rss_mb']:.0f} MB (idle {r['idle_import_rss_mb']:.0f}), "
        f"{r['slope_mb_per_10k']:+.3f} MB/10k msgs{ci} over {r['consumed']:,.0f} of "
        f"{r['backlog_messages']:,} msgs, {done}",
        "< 200 MB, CI low <= 0",
        _yes(r["meets_target"]),
    )


def _batch(r: dict[str, Any]) -> Row:
    return (
        f"{r['casewatch_turns_per_second']} turns/s = {r['casewatch_ratio_to_ideal']:.2f} of ideal "
        f"(bare client {r['bare_client_ratio_to_ideal']:.2f})",
        "-",
        "-",
    )


def _arbitration(r: dict[str, Any]) -> Row:
    return (
        f"arbiter calls/turn {r['arbiter_calls_per_turn']:.3f}, cost vs 3 judges "
        f"{r['cost_ratio_vs_three_judges']:.3f} (expected {r['expected_ratio']:.3f})",
        "= expected",
        _yes(abs(r["cost_ratio_vs_three_judges"] - r["expected_ratio"]) < 0.01),
    )


def _offline_judge(r: dict[str, Any]) -> Row:
    def cell(name: str) -> str:
        crit = ("hallucination", "identifier_integrity", "resolution_alignment")
        parts = []
        for metric, short in zip(crit, ("hal", "ids", "res"), strict=True):
            f = r[name][metric]
            kappa = "-" if f["kappa"] is None else f"{f['kappa']:.2f}"
            recall = "-" if f["severe_recall"] is None else f"{f['severe_recall']:.2f}"
            parts.append(f"{short} {f['accuracy']:.2f}/{kappa}/{recall}")
        return f"{name}: " + " ".join(parts)

    return (
        f"acc/kappa/severe recall {cell('heldout')}; {cell('calibration')}",
        "-",
        "-",
    )


def _scrape(r: dict[str, Any]) -> Row:
    return (
        f"{r['render_ms']:.0f} ms for {r['samples']:,} samples "
        f"({r['payload_bytes'] / 1024:,.0f} KiB); "
        f"{r['ratio_to_baseline']:.2f} of a plain counter with as many samples",
        "< 20 ms",
        _yes(r["meets_target"]),
    )


def _time_to_detect(r: dict[str, Any]) -> Row:
    delays = ", ".join(
        f"{row['judged_per_s']:g}/s not fired"
        if row["delay_s"] is None
        else f"{row['judged_per_s']:g}/s {row['delay_s'] / 60:.0f} min "
        f"({row['ratio_to_cusum']}x CUSUM)"
        for row in r["rows"]
    )
    return (
        f"5 % -> 15 % severe detected after {delays}; "
        f"false alarms {r['false_alarms_per_day']}/day (K = {r['factor']:g})",
        "all detected",
        _yes(r["all_detected"]),
    )


@dataclass(frozen=True)
class Bench:
    name: str
    script: str
    summarise: Callable[[dict[str, Any]], Row]


BENCHES = (
    Bench("ingest", "ingest.py", _ingest),
    Bench("judging", "judging.py", _judging),
    Bench("memory", "memory.py", _memory),
    Bench("batch_throughput", "batch_throughput.py", _batch),
    Bench("arbitration_cost", "arbitration_cost.py", _arbitration),
    Bench("offline_judge", "offline_judge.py", _offline_judge),
    Bench("scrape", "scrape.py", _scrape),
    Bench("time_to_detect", "time_to_detect.py", _time_to_detect),
)


def last_json_line(text: str) -> dict[str, Any] | None:
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                return None
            return doc if isinstance(doc, dict) else None
    return None


def run(bench: Bench) -> tuple[dict[str, Any] | None, float, int]:
    print(f"=== {bench.name}: bench/{bench.script}", flush=True)
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, str(ROOT / "bench" / bench.script)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        print(f"timed out after {TIMEOUT_S} s")
        return None, time.perf_counter() - started, -1
    print(proc.stdout, end="", flush=True)
    return last_json_line(proc.stdout), time.perf_counter() - started, proc.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated bench names")
    parser.add_argument("--json", type=Path, default=None, help="write all results here")
    args = parser.parse_args(argv)
    wanted = {n for n in args.only.split(",") if n}
    unknown = wanted - {b.name for b in BENCHES}
    if unknown:
        parser.error(f"unknown bench(es): {', '.join(sorted(unknown))}")
    rows: list[tuple[str, str, str, str, float]] = []
    results: dict[str, Any] = {}
    failed = False
    for bench in BENCHES:
        if wanted and bench.name not in wanted:
            continue
        result, seconds, code = run(bench)
        if result is None:
            failed = True
            rows.append((bench.name, f"FAILED (exit code {code}, no JSON line)", "", "", seconds))
            continue
        results[bench.name] = result
        figure, target, met = bench.summarise(result)
        if code != 0:
            failed = True
            met = f"{met} (exit {code})"
        rows.append((bench.name, figure, target, met, seconds))
    print()
    widths = [max(len(r[i]) for r in rows) for i in range(4)] if rows else [0] * 4
    header = ("bench", "result", "target", "met")
    widths = [max(w, len(h)) for w, h in zip(widths, header, strict=True)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + "  seconds")
    for row in rows:
        cells = [c.ljust(w) for c, w in zip(row[:4], widths, strict=True)]
        print("  ".join(cells) + f"  {row[4]:7.0f}")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
