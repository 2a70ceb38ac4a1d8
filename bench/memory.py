"""Memory under a backlog: the daemon's RSS stays flat while it works a big topic to its end.

Starts its own Tansu broker and puts ``--backlog`` (200,000) ~1 KB turn events on a topic,
then runs the daemon as a real process (``casewatch run --config ...``) against the fake
OpenAI-compatible server (a subprocess) at ``--latency`` and ``--concurrency``, sampling
``--rate`` of the turns, until every turn is consumed and nothing is in flight (or
``--timeout`` seconds pass, which is reported as not worked through). The defaults (10 ms,
8 calls, 1 %) judge faster than the sampled share arrives, so a backlog is worked through in
minutes; ``--latency 0.05 --concurrency 4 --rate 0.05`` (the old defaults) keep the judge
queue full instead, so the daemon holds back its polling and memory is bounded by the
pipeline's design (max_in_flight turns + one held poll + the store batch). Every 0.5 s it
samples the daemon's RSS (psutil) and its /metrics (turns consumed, judged, in flight, paused
partitions).

Reported: peak RSS (target < 200 MB), the slope of RSS against messages consumed (MB per 10k
messages, least squares after a 20 % warm-up) with its 95 % confidence interval (scipy's
``linregress`` standard error, t distribution), peak RSS of the first and second half, and,
for context, the RSS of an idle ``python -c "import monitor.stream.daemon"``. With
``--tracemalloc`` the daemon runs under tracemalloc (slower) and the bench prints the
allocation sites that grew most between a snapshot at ``--snapshot-at`` messages and one at
the end.

    .venv/bin/python bench/memory.py [--backlog 200000] [--timeout 540] [--tracemalloc]

Prints a readable report, then one JSON line of results.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import yaml
from prometheus_client.parser import text_string_to_metric_families
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.batch_throughput import MODEL, start_server  # noqa: E402
from bench.ingest import (  # noqa: E402
    MAX_POLL_RECORDS,
    TOPIC,
    broker_with_topic,
    crc32c_impl,
    fill_topic,
    kafka_section,
)
from consumers.tansu import free_port  # noqa: E402
from monitor.runtime.logs import configure_logging  # noqa: E402

MB = 1024 * 1024
KEY_ENV = "CASEWATCH_BENCH_JUDGE_KEY"  # the key goes through the environment, never argv
MAX_IN_FLIGHT = 256
WARMUP_FRACTION = 0.2  # of the run, left out of the slope: imports, pools and caches fill up
TARGET_PEAK_MB = 200
TRACED = Path(__file__).with_name("_traced_daemon.py")


def idle_rss_mb(module: str = "monitor.stream.daemon") -> float:
    """RSS of a Python process that has only imported ``module``."""
    code = f"import sys, {module}; print('ready', flush=True); sys.stdin.read()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise SystemExit("the idle baseline process did not start")
        time.sleep(0.5)
        return float(psutil.Process(proc.pid).memory_info().rss) / MB
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def casewatch_cmd(traced: bool) -> list[str]:
    if traced:
        return [sys.executable, str(TRACED)]
    script = Path(sys.executable).with_name("casewatch")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "monitor.cli"]


def write_config(path: Path, bootstrap: str, base_url: str, port: int, args: Any) -> None:
    config = {
        "kafka": kafka_section(bootstrap),
        "judges": {
            "bench": {
                "kind": "openai",
                "base_url": base_url,
                "model": MODEL,
                "api_key_env": KEY_ENV,
            }
        },
        "judge": "bench",
        # No hourly budget (production has one): the bench measures memory over the whole backlog.
        "sampling": {
            "default_rate": args.rate,
            "budget_calls_per_hour": None,
            "budget_usd_per_hour": None,
        },
        "daemon": {"concurrency": args.concurrency, "max_in_flight": MAX_IN_FLIGHT},
        "storage": {"url": f"sqlite:///{path.parent / 'verdicts.db'}", "retention_days": None},
        "server": {"host": "127.0.0.1", "port": port},
        "log_level": "warning",
    }
    path.write_text(yaml.safe_dump(config))


def scrape(port: int) -> dict[str, float] | None:
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(url, timeout=2) as resp:
            text = resp.read().decode()
    except (urllib.error.URLError, OSError):
        return None
    out = {"consumed": 0.0, "judged": 0.0, "in_flight": 0.0, "paused": 0.0}
    names = {
        "casewatch_turns_consumed_total": "consumed",
        "casewatch_turns_judged_total": "judged",
        "casewatch_in_flight": "in_flight",
        "casewatch_paused_partitions": "paused",
    }
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name in names:
                out[names[s.name]] += s.value
    return out


def sample_daemon(
    proc: subprocess.Popen[bytes], port: int, args: Any, snapshots: Path | None
) -> list[dict[str, float]]:
    ps = psutil.Process(proc.pid)
    samples: list[dict[str, float]] = []
    started = time.monotonic()
    snapped = False
    while time.monotonic() - started < args.timeout:
        if proc.poll() is not None:
            log = Path(proc.args[-1]).parent / "daemon.log"  # type: ignore[index]
            tail = log.read_text(errors="replace").splitlines()[-15:] if log.exists() else []
            raise SystemExit(
                f"the daemon exited early with code {proc.returncode}; its log ends:\n"
                + "\n".join(tail)
            )
        rss = float(ps.memory_info().rss) / MB
        metrics = scrape(port)
        if metrics is not None:
            samples.append({"t": time.monotonic() - started, "rss_mb": rss, **metrics})
            if snapshots is not None and not snapped and metrics["consumed"] >= args.snapshot_at:
                take_snapshot(proc, snapshots / "early.snap")
                snapped = True
            if metrics["consumed"] >= args.messages and metrics["in_flight"] == 0:
                break  # worked through: every turn read and finished
        time.sleep(0.5)
    if snapshots is not None and proc.poll() is None:
        take_snapshot(proc, snapshots / "late.snap")
    return samples


def take_snapshot(proc: subprocess.Popen[bytes], path: Path) -> None:
    """Ask the traced daemon (bench/_traced_daemon.py) for a tracemalloc snapshot; wait for it."""
    proc.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 120
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.2)


def grown(snapshots: Path, top: int = 12) -> list[str]:
    import tracemalloc

    early, late = snapshots / "early.snap", snapshots / "late.snap"
    if not (early.exists() and late.exists()):
        return ["(no tracemalloc snapshots were written)"]
    before = tracemalloc.Snapshot.load(str(early))
    after = tracemalloc.Snapshot.load(str(late))
    diff = after.compare_to(before, "lineno")
    total = sum(d.size_diff for d in diff)
    held = after.statistics("lineno")
    lines = [f"tracemalloc, at the end: {sum(st.size for st in held) / MB:.1f} MB traced; largest"]
    for st in held[:top]:
        frame = st.traceback[0]
        lines.append(f"  {st.size / MB:7.2f} MB ({st.count} blocks) {_where(frame)}")
    lines.append(f"tracemalloc, end - early snapshot: {total / MB:+.1f} MB; grew most")
    for d in diff[:top]:
        frame = d.traceback[0]
        lines.append(f"  {d.size_diff / MB:+7.2f} MB ({d.count_diff:+d} blocks) {_where(frame)}")
    return lines


def _where(frame: Any) -> str:
    return f"{str(frame.filename).split('site-packages/')[-1]}:{frame.lineno}"


def analyse(samples: list[dict[str, float]]) -> dict[str, float]:
    active = [s for s in samples if s["consumed"] > 0]
    if len(active) < 4:
        raise SystemExit("too few samples with messages consumed to analyse")
    t0, t1 = active[0]["t"], active[-1]["t"]
    cut = t0 + WARMUP_FRACTION * (t1 - t0)
    steady = [s for s in active if s["t"] >= cut]
    x = np.array([s["consumed"] / 10_000 for s in steady])
    y = np.array([s["rss_mb"] for s in steady])
    slope, low, high = 0.0, 0.0, 0.0
    if len(steady) >= 3 and np.ptp(x) > 0:
        fit = stats.linregress(x, y)
        half = float(stats.t.ppf(0.975, len(steady) - 2)) * float(fit.stderr)
        slope, low, high = float(fit.slope), float(fit.slope) - half, float(fit.slope) + half
    mid = (t0 + t1) / 2
    span = max(s["consumed"] for s in active) - active[0]["consumed"]
    return {
        "peak_rss_mb": max(s["rss_mb"] for s in samples),
        "first_half_peak_mb": max(s["rss_mb"] for s in active if s["t"] < mid),
        "second_half_peak_mb": max(s["rss_mb"] for s in active if s["t"] >= mid),
        "slope_mb_per_10k": slope,
        "slope_ci95_low_mb_per_10k": low,
        "slope_ci95_high_mb_per_10k": high,
        "steady_samples": float(len(steady)),
        "consumed": max(s["consumed"] for s in samples),
        "judged": max(s["judged"] for s in samples),
        "consumed_per_second": span / (t1 - t0) if t1 > t0 else 0.0,
        "paused_share": sum(1 for s in active if s["paused"] > 0) / len(active),
        # in_flight counts turns read and not finished: the judge queue plus a held poll.
        "queue_full_share": sum(1 for s in active if s["in_flight"] >= MAX_IN_FLIGHT) / len(active),
        "max_in_flight_seen": max(s["in_flight"] for s in samples),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", "--messages", dest="messages", type=int, default=200_000)
    parser.add_argument(
        "--timeout",
        "--duration",
        dest="timeout",
        type=float,
        default=540.0,
        help="seconds of sampling at most; the run normally ends when the backlog is done",
    )
    parser.add_argument("--latency", type=float, default=0.01, help="judge latency (s)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rate", type=float, default=0.01, help="sampling rate")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--tracemalloc", action="store_true", help="snapshot what grows")
    parser.add_argument("--snapshot-at", type=int, default=100_000, help="early snapshot (msgs)")
    args = parser.parse_args(argv)
    configure_logging("warning")
    idle = idle_rss_mb()
    # What `casewatch run` imports before reading a message: the CLI registers every command.
    idle_cli = idle_rss_mb("monitor.cli")
    print(
        f"idle `import monitor.stream.daemon` process: {idle:.0f} MB RSS; "
        f"idle `import monitor.cli`: {idle_cli:.0f} MB"
    )
    server, base_url = start_server(args.latency)
    try:
        with (
            broker_with_topic(args.partitions) as broker,
            tempfile.TemporaryDirectory(prefix="casewatch-bench-") as tmp,
        ):
            started = time.perf_counter()
            rate = fill_topic(broker.bootstrap, TOPIC, args.messages, partitions=args.partitions)
            print(f"produced {args.messages} turns in {time.perf_counter() - started:.0f} s")
            config, port = Path(tmp) / "casewatch.yaml", free_port()
            write_config(config, broker.bootstrap, base_url, port, args)
            env = {**os.environ, KEY_ENV: "bench-key"}
            snapshots = Path(tmp) if args.tracemalloc else None
            if snapshots is not None:
                env["CASEWATCH_BENCH_SNAPSHOTS"] = str(snapshots)
            with (Path(tmp) / "daemon.log").open("wb") as log:
                daemon = subprocess.Popen(
                    [*casewatch_cmd(args.tracemalloc), "run", "--config", str(config)],
                    cwd=tmp,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                )
                try:
                    samples = sample_daemon(daemon, port, args, snapshots)
                finally:
                    daemon.send_signal(signal.SIGTERM)
                    try:
                        exit_code = daemon.wait(timeout=60)
                    except subprocess.TimeoutExpired:
                        daemon.kill()
                        exit_code = daemon.wait()
            if exit_code != 0:
                tail = (Path(tmp) / "daemon.log").read_text(errors="replace")[-2000:]
                print(f"the daemon exited with code {exit_code}; log tail:\n{tail}")
            growth = grown(snapshots) if snapshots is not None else []
    finally:
        server.terminate()
        server.wait(timeout=10)
    r = analyse(samples)
    done = samples[-1]["consumed"] >= args.messages and samples[-1]["in_flight"] == 0
    contains_zero = r["slope_ci95_low_mb_per_10k"] <= 0.0 <= r["slope_ci95_high_mb_per_10k"]
    # The target is "no growth": a slope significantly below zero (RSS settling after the
    # start-up peak, a fetch buffer freed) is not a leak, so only the CI's lower bound counts.
    no_growth = r["slope_ci95_low_mb_per_10k"] <= 0.0
    result: dict[str, Any] = {
        "bench": "memory",
        "backlog_messages": args.messages,
        "produce_msgs_per_second": round(rate),
        "duration_seconds": round(samples[-1]["t"], 1),
        "judge_latency_seconds": args.latency,
        "judge_concurrency": args.concurrency,
        "sampling_rate": args.rate,
        "idle_import_rss_mb": round(idle, 1),
        "idle_cli_import_rss_mb": round(idle_cli, 1),
        **{k: round(v, 3 if k.endswith(("_10k", "_share")) else 1) for k, v in r.items()},
        "in_flight_bound": MAX_IN_FLIGHT + MAX_POLL_RECORDS,
        "peak_ratio_to_idle": round(r["peak_rss_mb"] / idle, 2),
        "worked_through": done,
        "slope_ci_contains_zero": contains_zero,
        "no_significant_growth": no_growth,
        "target_peak_mb": TARGET_PEAK_MB,
        "meets_target": r["peak_rss_mb"] < TARGET_PEAK_MB and no_growth and done,
        "tracemalloc": args.tracemalloc,
        "daemon_exit_code": exit_code,
        "crc32c": crc32c_impl(),
    }
    print(
        f"daemon consumed {r['consumed']:,.0f} of {args.messages:,} turns in "
        f"{result['duration_seconds']} s ({r['consumed_per_second']:,.0f}/s), judged "
        f"{r['judged']:,.0f}; judge queue full (in flight >= {MAX_IN_FLIGHT}) in "
        f"{r['queue_full_share']:.0%} of samples, max in flight {r['max_in_flight_seen']:.0f} "
        f"(bound {result['in_flight_bound']}), partitions paused in {r['paused_share']:.0%}\n"
        f"  RSS peak {r['peak_rss_mb']:.0f} MB ({result['peak_ratio_to_idle']}x the idle import); "
        f"first half {r['first_half_peak_mb']:.0f} MB, second half {r['second_half_peak_mb']:.0f}"
        f" MB; slope {r['slope_mb_per_10k']:+.3f} MB per 10k messages, 95 % CI "
        f"[{r['slope_ci95_low_mb_per_10k']:+.3f}, {r['slope_ci95_high_mb_per_10k']:+.3f}] "
        f"(target: peak < {TARGET_PEAK_MB} MB, no significant growth: CI lower bound <= 0)\n"
        f"  worked through to the end: {'yes' if done else 'NO'}; SIGTERM: exit code {exit_code}"
    )
    for line in growth:
        print(line)
    print(json.dumps(result))
    return 0 if exit_code == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
