"""Memory under a backlog: the daemon's RSS stays flat while it chews through a big topic.

Starts its own Tansu broker and puts ``--messages`` (200,000) ~1 KB turn events on a topic,
then runs the daemon as a real process (``casewatch run --config ...``) with a judge slower
than ingest: the fake OpenAI-compatible server (a subprocess) at ``--latency`` 50 ms and
``--concurrency`` 4 calls, i.e. at most 80 judged turns/s, while sampling ``--rate`` 5 % of
the turns asks for more than that at full consumer speed (~2k msgs/s on 2 cores). The judge
queue therefore stays full and the daemon holds back its polling (backpressure; partitions
are paused only when a held poll is stuck for over a second), so what bounds memory is the
pipeline's design (max_in_flight turns in flight + at most one held poll of records + the
store batch), not luck. Every 0.5 s for ``--duration`` seconds it samples the daemon's RSS
(psutil) and its /metrics (turns consumed, judged, in flight, paused partitions).

Reported: peak RSS (target < 300 MB), the slope of RSS against messages consumed (MB per 10k
messages, least squares after a warm-up), peak RSS of the first and second half of the run,
and, for context, the RSS of an idle ``python -c "import monitor.stream.daemon"``.

    .venv/bin/python bench/memory.py [--messages 200000] [--duration 60]

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
from monitor.logs import configure_logging  # noqa: E402

MB = 1024 * 1024
KEY_ENV = "CASEWATCH_BENCH_JUDGE_KEY"  # the key goes through the environment, never argv
MAX_IN_FLIGHT = 256
WARMUP_FRACTION = 0.2  # of the run, left out of the slope: imports, pools and caches fill up


def idle_rss_mb() -> float:
    """RSS of a Python process that has only imported the daemon module."""
    code = "import sys, monitor.stream.daemon; print('ready', flush=True); sys.stdin.read()"
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


def casewatch_cmd() -> list[str]:
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
        "sampling": {"default_rate": args.rate},
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


def sample_daemon(proc: subprocess.Popen[bytes], port: int, args: Any) -> list[dict[str, float]]:
    ps = psutil.Process(proc.pid)
    samples: list[dict[str, float]] = []
    started = time.monotonic()
    while time.monotonic() - started < args.duration:
        if proc.poll() is not None:
            raise SystemExit(f"the daemon exited early with code {proc.returncode}")
        rss = float(ps.memory_info().rss) / MB
        metrics = scrape(port)
        if metrics is not None:
            samples.append({"t": time.monotonic() - started, "rss_mb": rss, **metrics})
            if metrics["consumed"] >= args.messages:
                break
        time.sleep(0.5)
    return samples


def analyse(samples: list[dict[str, float]]) -> dict[str, float]:
    active = [s for s in samples if s["consumed"] > 0]
    if len(active) < 4:
        raise SystemExit("too few samples with messages consumed to analyse")
    t0, t1 = active[0]["t"], active[-1]["t"]
    cut = t0 + WARMUP_FRACTION * (t1 - t0)
    steady = [s for s in active if s["t"] >= cut]
    x = np.array([s["consumed"] / 10_000 for s in steady])
    y = np.array([s["rss_mb"] for s in steady])
    slope = float(np.polyfit(x, y, 1)[0]) if np.ptp(x) > 0 else 0.0
    mid = (t0 + t1) / 2
    span = max(s["consumed"] for s in active) - active[0]["consumed"]
    return {
        "peak_rss_mb": max(s["rss_mb"] for s in samples),
        "first_half_peak_mb": max(s["rss_mb"] for s in active if s["t"] < mid),
        "second_half_peak_mb": max(s["rss_mb"] for s in active if s["t"] >= mid),
        "slope_mb_per_10k": slope,
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
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of sampling")
    parser.add_argument("--latency", type=float, default=0.05, help="judge latency (s)")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rate", type=float, default=0.05, help="sampling rate")
    parser.add_argument("--partitions", type=int, default=2)
    args = parser.parse_args(argv)
    configure_logging("warning")
    idle = idle_rss_mb()
    print(f"idle `import monitor.stream.daemon` process: {idle:.0f} MB RSS")
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
            with (Path(tmp) / "daemon.log").open("wb") as log:
                daemon = subprocess.Popen(
                    [*casewatch_cmd(), "run", "--config", str(config)],
                    cwd=tmp,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                )
                try:
                    samples = sample_daemon(daemon, port, args)
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
    finally:
        server.terminate()
        server.wait(timeout=10)
    r = analyse(samples)
    result: dict[str, Any] = {
        "bench": "memory",
        "backlog_messages": args.messages,
        "produce_msgs_per_second": round(rate),
        "duration_seconds": round(samples[-1]["t"], 1),
        "judge_latency_seconds": args.latency,
        "judge_concurrency": args.concurrency,
        "sampling_rate": args.rate,
        "idle_import_rss_mb": round(idle, 1),
        **{k: round(v, 3 if k.endswith(("_10k", "_share")) else 1) for k, v in r.items()},
        "in_flight_bound": MAX_IN_FLIGHT + MAX_POLL_RECORDS,
        "peak_ratio_to_idle": round(r["peak_rss_mb"] / idle, 2),
        "target_peak_mb": 300,
        "meets_target": r["peak_rss_mb"] < 300,
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
        f" MB; slope {r['slope_mb_per_10k']:+.2f} MB per 10k messages (target: peak < 300 MB)\n"
        f"  SIGTERM: exit code {exit_code}"
    )
    print(json.dumps(result))
    return 0 if exit_code == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
