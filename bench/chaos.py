"""Chaos: SIGKILLs, a failing judge and a broker restart; nothing lost, nothing paid twice.

A benchmark, not a test (bounded by ``--max-seconds``). It starts:
- a local S3 (``moto_server``, the ``moto[server]`` dev dependency) with a bucket, and the
  embedded Tansu broker on its ``s3://`` engine, so the broker keeps topics and committed
  offsets across its own restart (its memory engine forgets everything);
- the fake OpenAI-compatible judge (tests/fake_judge_server.py) in a process of its own, failing
  ``--fail`` (30 %) of requests in assorted ways: HTTP 500 and 503, 429 with Retry-After, dropped
  connections, replies slower than the judge timeout, malformed JSON, output with a missing
  metric. It logs every request's event id and outcome;
- ``--turns`` turns (examples/turns.jsonl with unique ids) on ``--partitions`` partitions with
  the dead-letter tests' poison classes mixed in (not JSON, not an object, bad UTF-8, schema,
  empty, too large);
- ``casewatch run`` as a real process (one replica, SQLite store, the shipped Kafka defaults),
  SIGKILLed ``--kills`` times, each time a random 0.5–4 s after its first new verdict, and
  restarted at once: each restart's time to its first new verdict is measured. Halfway, the
  broker is stopped for ``--outage`` seconds and started again while the daemon runs. The last
  life runs to the end of the stream and stops with SIGTERM.

It reports turns lost (valid turns without a verdict row), verdict rows duplicated, judge calls
per turn (successful judge replies per turn judged ok: a replayed turn judged again shows up
here; HTTP requests per turn, retries included, for context), turns ending judge_failed and why,
silent drops (lost turns plus poison records missing from the dead-letter topic), restart to
first verdict p50 / max, and the broker outage's effect.

Each restart's time is split into phases (``bench/_restart_phases.py``): the daemon runs under
``bench/_timeline_daemon.py``, which adds kafka-python's group-protocol steps (coordinator,
JoinGroup, SyncGroup, OffsetFetch, first fetch) to the daemon's own startup lines ("settings
loaded", "startup: ...", "daemon started", "first records polled"); the bench adds the first
judge request and the first new verdict. ``--storage memory`` runs the broker on its memory
engine instead (no broker outage then: that engine forgets everything), to tell the s3
engine's share from the group protocol's.

    .venv/bin/python bench/chaos.py                    # short: 600 turns, 3 kills (~2 min)
    .venv/bin/python bench/chaos.py --turns 20000 --kills 20 --max-seconds 1500
    .venv/bin/python bench/chaos.py --static            # kafka.group_instance_id set
    .venv/bin/python bench/chaos.py --static --storage memory --kills 6

Prints a readable report, then one JSON line of results.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from bench import _restart_phases as restart_phases  # noqa: E402
from consumers._kafka import KafkaConsumer, KafkaProducer, KafkaTopicPartition  # noqa: E402
from consumers.tansu import MEMORY_STORAGE, EmbeddedBroker, create_topics, free_port  # noqa: E402
from monitor.demo.examples import load_examples  # noqa: E402

TOPIC = "chaos.turns"
DLQ_SUFFIX = ".dlq"
MAX_MESSAGE_BYTES = 64 * 1024
BUCKET = "tansu"
MARK = re.compile(r"\[cw:([A-Za-z0-9_.:-]+)\]")  # the event id, planted in each turn's query
POISON: list[tuple[str, bytes]] = [
    ("not_json", b"{not json"),
    ("not_object", b"[1, 2]"),
    ("bad_utf8", b"\xff\xfe\xfa"),
    ("schema", b'{"event_id": "x"}'),
    ("empty", b""),
    ("too_large", b'{"pad": "' + b"x" * (MAX_MESSAGE_BYTES + 10) + b'"}'),
]
JUDGE_TIMEOUT_S = 2.0


# ---------------------------------------------------------------- the failing judge (child)


def serve_judge(log_path: Path, fail: float, latency: float, seed: int) -> int:
    """Run the fake judge with a failing responder; log one line per request."""
    from tests.fake_judge_server import (
        FakeJudgeServer,
        Reply,
        disconnect,
        malformed,
        missing_metric,
        rate_limited,
        scores,
        server_error,
        slow,
    )

    # Shares of all requests (they add up to ``fail``), then the rest answered well.
    kinds: list[tuple[str, float, Any]] = [
        ("http_500", 0.27, lambda: server_error(500)),
        ("http_503", 0.13, lambda: server_error(503)),
        ("http_429", 0.17, lambda: rate_limited(0.2)),
        ("disconnect", 0.13, disconnect),
        ("timeout", 0.10, lambda: slow(JUDGE_TIMEOUT_S + 1.0)),
        ("malformed", 0.10, malformed),
        ("missing_metric", 0.10, missing_metric),
    ]
    rng = random.Random(seed)
    lock = threading.Lock()
    out = log_path.open("a", buffering=1)

    def respond(request: dict[str, Any]) -> Reply:
        found = MARK.search(json.dumps(request.get("messages", [])))
        event = found.group(1) if found else "?"
        with lock:
            x = rng.random()
        reply, kind = scores(0.9), "ok"
        if x < fail:
            x /= fail
            for name, share, make in kinds:
                if x < share:
                    reply, kind = make(), name
                    break
                x -= share
        with lock:
            out.write(f"{event}\t{kind}\t{time.time():.3f}\n")
        return reply

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with FakeJudgeServer(respond, latency=latency) as server:
        print(f"base_url={server.base_url}", flush=True)
        stop.wait()
    out.close()
    return 0


# ---------------------------------------------------------------- parts


def start_s3(workdir: Path) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    import boto3

    port = free_port()
    binary = Path(sys.executable).with_name("moto_server")
    log = (workdir / "moto.log").open("ab")
    proc = subprocess.Popen(
        [str(binary), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}"
    env = {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT": url,
        "AWS_ALLOW_HTTP": "true",
    }
    s3 = boto3.client(
        "s3",
        endpoint_url=url,
        aws_access_key_id="test",
        aws_secret_access_key="test",  # noqa: S106 -- moto's dummy credentials
        region_name="us-east-1",
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            s3.create_bucket(Bucket=BUCKET)
            return proc, env
        except Exception:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise SystemExit(
                    f"moto_server did not start (see {workdir / 'moto.log'})"
                ) from None
            time.sleep(0.2)


def start_judge(workdir: Path, fail: float, latency: float, seed: int) -> tuple[Any, str, Path]:
    log = workdir / "judge-requests.tsv"
    proc = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--serve-judge",
            str(log),
            "--fail",
            str(fail),
            "--latency",
            str(latency),
            "--seed",
            str(seed),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("base_url="):
        proc.terminate()
        raise SystemExit(f"the fake judge did not start (printed {line!r})")
    return proc, line.removeprefix("base_url="), log


def make_stream(n: int, poison_every: int, rng: random.Random) -> tuple[list[bytes], list[str]]:
    base = load_examples(ROOT / "examples" / "turns.jsonl")
    run = uuid.uuid4().hex[:6]
    values: list[bytes] = []
    ids: list[str] = []
    for i in range(n):
        doc = dict(base[i % len(base)])
        event_id = f"{doc['event_id']}-{run}-{i}"
        doc["event_id"] = event_id
        doc["conversation_id"] = f"{doc['conversation_id']}-{run}-{i}"
        doc["query"] = f"{doc['query']} [cw:{event_id}]"
        values.append(json.dumps(doc).encode())
        ids.append(event_id)
        if poison_every and i % poison_every == poison_every - 1:
            values.append(rng.choice(POISON)[1])
    return values, ids


def produce(bootstrap: str, values: list[bytes], partitions: int) -> None:
    """Publish in chunks (each flushed): the s3 engine takes ~200 records/s here, slower than
    a single batch's delivery timeout allows for the whole stream."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        linger_ms=20,
        max_request_size=4 * MAX_MESSAGE_BYTES,
        delivery_timeout_ms=600_000,
        request_timeout_ms=120_000,
    )
    try:
        for start in range(0, len(values), 1000):
            futures = [
                producer.send(TOPIC, value=v, partition=i % partitions)
                for i, v in enumerate(values[start : start + 1000], start)
            ]
            producer.flush(timeout=600)
            for future in futures:
                future.get(timeout=60)
    finally:
        producer.close(timeout=10)


def daemon_config(workdir: Path, bootstrap: str, judge_url: str, static: bool, group: str) -> Path:
    kafka: dict[str, Any] = {
        "bootstrap_servers": [bootstrap],
        "topics": [TOPIC],
        "group_id": group,
        "dlq_suffix": DLQ_SUFFIX,
        "max_poll_records": 100,
        "max_message_bytes": MAX_MESSAGE_BYTES,
    }
    if static:
        kafka["group_instance_id"] = "casewatch-chaos-0"
    doc = {
        "kafka": kafka,
        "judges": {
            "remote": {
                "kind": "openai",
                "base_url": judge_url,
                "model": "fake-judge",
                "timeout_seconds": JUDGE_TIMEOUT_S,
                "transport_retries": 4,
                "output_retries": 2,
                "backoff_initial_seconds": 0.05,
                "backoff_max_seconds": 0.5,
            }
        },
        "judge": "remote",
        # Every turn judged, no budget: the chaos run counts every turn (production samples).
        "sampling": {
            "default_rate": 1.0,
            "budget_calls_per_hour": None,
            "budget_usd_per_hour": None,
        },
        "storage": {"url": f"sqlite:///{workdir / 'chaos.db'}", "retention_days": None},
        "server": {"host": "127.0.0.1", "port": 0},
        "daemon": {"concurrency": 16, "max_in_flight": 64, "drain_timeout_seconds": 10},
        "log_level": "info",  # the startup milestones are info lines
    }
    path = workdir / "casewatch.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def casewatch_cmd() -> list[str]:
    # ``casewatch`` with kafka-python's group-protocol milestones on stderr (the timeline).
    return [sys.executable, str(ROOT / "bench" / "_timeline_daemon.py")]


class Db:
    def __init__(self, path: Path) -> None:
        self._path = path

    def _query(self, sql: str) -> list[tuple[Any, ...]]:
        if not self._path.exists():
            return []
        conn = sqlite3.connect(f"file:{self._path}?mode=ro", uri=True, timeout=10)
        try:
            return conn.execute(sql).fetchall()
        except sqlite3.OperationalError:  # schema not there yet
            return []
        finally:
            conn.close()

    def verdicts(self) -> int:
        rows = self._query("SELECT count(*) FROM verdicts")
        return int(rows[0][0]) if rows else 0

    def summary(self) -> dict[str, Any]:
        rows = self._query(
            "SELECT count(*), count(DISTINCT event_id || '/' || judge_config_hash) FROM verdicts"
        )
        total, distinct = rows[0] if rows else (0, 0)
        events = {r[0] for r in self._query("SELECT event_id FROM verdicts")}
        statuses = dict(self._query("SELECT status, count(*) FROM verdicts GROUP BY status"))
        reasons = dict(
            self._query(
                "SELECT failure_reason, count(*) FROM verdicts WHERE status = 'judge_failed' "
                "GROUP BY failure_reason"
            )
        )
        ok_events = {r[0] for r in self._query("SELECT event_id FROM verdicts WHERE status='ok'")}
        return {
            "rows": total,
            "distinct": distinct,
            "events": events,
            "ok_events": ok_events,
            "statuses": statuses,
            "failed_reasons": reasons,
        }


def committed(bootstrap: str, group: str, partitions: int) -> dict[int, int | None]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return {
            p: consumer.committed(KafkaTopicPartition(TOPIC, p), timeout_ms=10_000)
            for p in range(partitions)
        }
    finally:
        consumer.close(autocommit=False)


def dead_letters(bootstrap: str, partitions: int, expected: int, timeout_s: float) -> set[str]:
    """Distinct source records (partition/offset headers) on the dead-letter topic."""
    from consumers.dlq import HEADER_OFFSET, HEADER_PARTITION

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    seen: set[str] = set()
    try:
        tps = [KafkaTopicPartition(TOPIC + DLQ_SUFFIX, p) for p in range(partitions)]
        parts = consumer.partitions_for_topic(TOPIC + DLQ_SUFFIX) or {0}
        tps = [KafkaTopicPartition(TOPIC + DLQ_SUFFIX, p) for p in sorted(parts)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + timeout_s
        while len(seen) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                for r in records:
                    h = dict(r.headers or [])
                    where = (h.get(HEADER_PARTITION, b"?"), h.get(HEADER_OFFSET, b"?"))
                    seen.add(b"/".join(where).decode())
    finally:
        consumer.close(autocommit=False)
    return seen


def wait_until(cond: Any, timeout_s: float, step: float = 0.1) -> float | None:
    """Seconds until ``cond()`` held, or None at the timeout."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if cond():
            return time.monotonic() - start
        time.sleep(step)
    return None


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# ---------------------------------------------------------------- the run


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    started = time.monotonic()
    deadline = started + args.max_seconds
    workdir = Path(tempfile.mkdtemp(prefix="casewatch-chaos-"))
    print(f"work directory: {workdir}", flush=True)
    s3 = args.storage == "s3"
    moto, s3_env = start_s3(workdir) if s3 else (None, {})
    broker_port = free_port()

    def new_broker() -> EmbeddedBroker:
        b = EmbeddedBroker(
            port=broker_port,
            storage=f"s3://{BUCKET}/" if s3 else MEMORY_STORAGE,
            env=s3_env,
            log_path=workdir / "tansu.log",
        )
        b.start()
        return b

    broker = new_broker()
    judge, judge_url, judge_log = start_judge(workdir, args.fail, args.latency, args.seed)
    lives: list[dict[str, Any]] = []
    outage: dict[str, Any] = {}
    proc: subprocess.Popen[bytes] | None = None
    try:
        create_topics(broker.bootstrap, [TOPIC], args.partitions, dlq_suffix=DLQ_SUFFIX)
        values, ids = make_stream(args.turns, args.poison_every, rng)
        poison = len(values) - len(ids)
        t0 = time.monotonic()
        produce(broker.bootstrap, values, args.partitions)
        print(
            f"produced {len(ids)} turns + {poison} poison in {time.monotonic() - t0:.1f} s",
            flush=True,
        )
        group = f"casewatch-chaos-{uuid.uuid4().hex[:6]}"
        config = daemon_config(workdir, broker.bootstrap, judge_url, args.static, group)
        db = Db(workdir / "chaos.db")
        life = 0
        while True:
            before = db.verdicts()
            with (workdir / f"daemon-{life}.log").open("ab") as fh:
                spawned = time.time()
                proc = subprocess.Popen(
                    [*casewatch_cmd(), "run", "--config", str(config)], stdout=fh, stderr=fh
                )
            left = max(1.0, deadline - time.monotonic())
            ttfv = wait_until(lambda b=before: db.verdicts() > b or db.verdicts() >= len(ids), left)
            lives.append(
                {
                    "life": life,
                    "first_verdict_s": ttfv,
                    "verdicts_before": before,
                    "spawned": spawned,
                    "verdict_at": None if ttfv is None else spawned + ttfv,
                }
            )
            print(
                f"life {life}: first new verdict after "
                f"{ttfv if ttfv is None else round(ttfv, 1)} s "
                f"({before} verdicts so far)",
                flush=True,
            )
            if ttfv is None or time.monotonic() > deadline:
                break
            if life == args.kills // 2 and not outage and args.outage > 0:
                time.sleep(rng.uniform(0.5, 2.0))
                stopped_at = db.verdicts()
                broker.stop()
                down = time.monotonic()
                time.sleep(args.outage)
                broker = new_broker()
                up_count = db.verdicts()
                back = wait_until(
                    lambda c=up_count: db.verdicts() > c or db.verdicts() >= len(ids),
                    max(1.0, deadline - time.monotonic()),
                )
                outage = {
                    "down_s": round(time.monotonic() - down - (back or 0.0), 1),
                    "verdicts_while_down": up_count - stopped_at,
                    "first_verdict_after_broker_back_s": None if back is None else round(back, 1),
                    "daemon_survived": proc.poll() is None,
                }
                print(f"broker outage: {outage}", flush=True)
            if life >= args.kills or db.verdicts() >= len(ids):
                break
            time.sleep(rng.uniform(0.5, 4.0))
            proc.kill()
            proc.wait()
            life += 1
        # The last life runs to the end of the stream, then stops cleanly.
        end = wait_until(
            lambda: db.verdicts() >= len(ids), max(1.0, deadline - time.monotonic()), 0.5
        )
        if end is not None and proc is not None:
            ends = {p: n for p, n in enumerate(_partition_ends(len(values), args.partitions))}
            wait_until(
                lambda: committed(broker.bootstrap, group, args.partitions) == ends,
                max(1.0, min(60.0, deadline - time.monotonic())),
                1.0,
            )
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(90)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        final_commits = committed(broker.bootstrap, group, args.partitions)
        dlq = dead_letters(broker.bootstrap, args.partitions, poison, 60)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        judge.send_signal(signal.SIGTERM)
        try:
            judge.wait(30)
        except subprocess.TimeoutExpired:
            judge.kill()
        broker.stop()
        if moto is not None:
            moto.terminate()
            moto.wait(10)

    summary = db.summary()
    requests = collections.Counter()
    ok_replies: collections.Counter[str] = collections.Counter()
    request_times: list[float] = []
    for line in judge_log.read_text().splitlines():
        event, kind, at = line.split("\t")
        request_times.append(float(at))
        requests[kind] += 1
        if kind == "ok":
            ok_replies[event] += 1
    lost = [e for e in ids if e not in summary["events"]]
    ok_turns = len(summary["ok_events"])
    restarts = [lv["first_verdict_s"] for lv in lives[1:] if lv["first_verdict_s"] is not None]
    timelines = [_timeline(workdir, lv, request_times) for lv in lives[1:]]
    return {
        "turns": len(ids),
        "poison": poison,
        "partitions": args.partitions,
        "kills": len(lives) - 1,
        "membership": "static" if args.static else "dynamic",
        "turns_lost": len(lost),
        "verdict_rows_duplicated": summary["rows"] - summary["distinct"],
        "verdict_rows": summary["rows"],
        "judge_calls_per_turn": round(sum(ok_replies.values()) / ok_turns, 4) if ok_turns else None,
        "turns_judged_more_than_once": sum(1 for n in ok_replies.values() if n > 1),
        "judge_requests_per_turn": round(sum(requests.values()) / len(ids), 3),
        "judge_requests": dict(requests),
        "judge_failed": summary["statuses"].get("judge_failed", 0),
        "judge_failed_reasons": summary["failed_reasons"],
        "poison_dead_lettered": len(dlq),
        "silent_drops": len(lost) + max(0, poison - len(dlq)),
        "first_start_to_first_verdict_s": lives[0]["first_verdict_s"] if lives else None,
        "restart_to_first_verdict_p50_s": pct(restarts, 0.5),
        "restart_to_first_verdict_max_s": max(restarts) if restarts else None,
        "restarts_measured": len(restarts),
        "storage": args.storage,
        "restart_phases": restart_phases.summarize(timelines),
        "join_rounds_per_restart": sorted(int(t.get("join_rounds", 0)) for t in timelines),
        "broker_outage": outage,
        "committed_at_end": final_commits,
        "elapsed_s": round(time.monotonic() - started, 1),
        "workdir": str(workdir),
    }


def _timeline(workdir: Path, life: dict[str, Any], request_times: list[float]) -> dict[str, float]:
    spawned = life["spawned"]
    # The first judge request after the spawn (the previous life's may still be running: the
    # SIGKILL does not stop its sockets' far ends at once, but it sends nothing new).
    first_request = min((t for t in request_times if t >= spawned), default=None)
    lines = (workdir / f"daemon-{life['life']}.log").read_text(errors="replace").splitlines()
    return restart_phases.milestones(
        lines, spawned, {"judge_request": first_request, "first_verdict": life["verdict_at"]}
    )


def _partition_ends(n_values: int, partitions: int) -> list[int]:
    return [len(range(p, n_values, partitions)) for p in range(partitions)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--outage", type=float, default=5.0, help="broker down for this long")
    parser.add_argument("--fail", type=float, default=0.3, help="share of judge requests failing")
    parser.add_argument("--latency", type=float, default=0.05, help="judge reply latency, s")
    parser.add_argument("--poison-every", type=int, default=100, help="one poison per N turns")
    parser.add_argument("--static", action="store_true", help="set kafka.group_instance_id")
    parser.add_argument(
        "--storage",
        choices=("s3", "memory"),
        default="s3",
        help="the broker's engine; memory forgets everything when stopped (no --outage then)",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--max-seconds", type=float, default=300.0)
    parser.add_argument("--serve-judge", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.storage == "memory":
        args.outage = 0.0
    if args.serve_judge is not None:
        return serve_judge(args.serve_judge, args.fail, args.latency, args.seed)
    result = run(args)
    print()
    for key, value in result.items():
        if key not in ("workdir", "restart_phases"):
            print(f"{key:36s} {value}")
    print("\nrestart timeline (seconds, median over the restarts):")
    print(restart_phases.render(result["restart_phases"]))
    print(json.dumps(result))
    ok = result["turns_lost"] == 0 and result["verdict_rows_duplicated"] == 0
    return 0 if ok and result["silent_drops"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
