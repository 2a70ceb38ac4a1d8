"""Replicas on PostgreSQL, SIGKILLed: how many judge calls does a kill cost?

Starts the embedded Tansu broker (memory engine), the fake OpenAI-compatible judge
(tests/fake_judge_server.py, in this process, every reply valid after ``--latency`` s), a fresh
PostgreSQL schema, ``--turns`` turns on ``--partitions`` partitions, and ``--replicas``
``casewatch run`` processes in one consumer group (sampling 1.0, one judge: one call per turn).
Replica 0 is SIGKILLed ``--kills`` times, each a random 1-3 s after it last (re)joined and
stored something, and restarted at once. At the end every turn must be stored exactly once.

Extra judge calls = judge requests answered - turns. A kill costs the calls in flight at that
moment (at most ``daemon.concurrency``: they are judged again after the restart) plus any
verdict finished but not yet stored; a rebalance a kill causes may add the calls a surviving
replica abandons (``casewatch_revoke_abandoned_total``). The bound docs/how-it-works.md states
is ``daemon.concurrency`` per kill.

    .venv/bin/python bench/replica_kills.py                 # 3 replicas, 3,000 turns, 4 kills
    .venv/bin/python bench/replica_kills.py --runs 3        # the median of three runs

Needs PostgreSQL (CASEWATCH_TEST_PG_URL, default postgresql+psycopg://postgres@127.0.0.1:5432/test).
Prints one line per run, then one JSON line of results.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
import yaml  # noqa: E402
from psycopg import sql  # noqa: E402

from consumers._kafka import KafkaProducer  # noqa: E402
from consumers.tansu import EmbeddedBroker, create_topics, free_port  # noqa: E402
from monitor.storage.audit import counts  # noqa: E402
from monitor.storage.store import Store  # noqa: E402
from tests.fake_judge_server import FakeJudgeServer  # noqa: E402
from tests.fixtures.databases import make_turn  # noqa: E402

PG_URL = os.environ.get(
    "CASEWATCH_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
TOPIC = "replicas.turns"
# The key goes through the environment: casewatch refuses keys written in a config file.
KEY_ENV = "CASEWATCH_BENCH_JUDGE_KEY"


def wait_until(cond: Callable[[], bool], timeout: float, step: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


class Schema:
    """A throwaway PostgreSQL schema; ``url`` makes connections see only it."""

    def __init__(self) -> None:
        self.name = f"casewatch_bench_{uuid.uuid4().hex[:10]}"
        self._dsn = PG_URL.replace("postgresql+psycopg://", "postgresql://", 1)
        with psycopg.connect(self._dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.name)))
        sep = "&" if "?" in PG_URL else "?"
        self.url = f"{PG_URL}{sep}options={quote(f'-csearch_path={self.name}')}"

    def drop(self) -> None:
        with psycopg.connect(self._dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(self.name)))


def produce(bootstrap: str, n: int, partitions: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        for i in range(n):
            value = make_turn(f"evt-{i}").model_dump_json().encode()
            producer.send(TOPIC, value=value, partition=i % partitions)
        producer.flush(timeout=120)
    finally:
        producer.close(timeout=10)


def config(
    workdir: Path, bootstrap: str, judge: FakeJudgeServer, db_url: str, group: str, i: int,
    concurrency: int,
) -> Path:  # fmt: skip
    doc: dict[str, Any] = {
        "kafka": {
            "bootstrap_servers": [bootstrap],
            "topics": [TOPIC],
            "group_id": group,
            "client_id": f"replica-{i}",
            "session_timeout_ms": 6000,
            "heartbeat_interval_ms": 1000,
            "max_poll_interval_ms": 6000,
        },
        "judges": {
            "remote": {
                "kind": "openai",
                "base_url": judge.base_url,
                "model": "fake-judge",
                "api_key_env": KEY_ENV,
                "timeout_seconds": 30,
            }
        },
        "judge": "remote",
        # Every turn judged, no budget (the production defaults sample 10 % and stop at 1,000
        # calls an hour): the run counts every turn.
        "sampling": {
            "default_rate": 1.0,
            "budget_calls_per_hour": None,
            "budget_usd_per_hour": None,
        },
        "storage": {"url": db_url},
        "server": {"host": "127.0.0.1", "port": free_port()},
        "daemon": {"concurrency": concurrency},
        "log_level": "info",
    }
    path = workdir / f"replica-{i}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def spawn(cfg: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as fh:
        return subprocess.Popen(
            [sys.executable, "-m", "monitor.cli", "run", "--config", str(cfg)],
            stdout=fh,
            stderr=fh,
            cwd=ROOT,
            env={**os.environ, KEY_ENV: "sk-fake"},
        )


def one_run(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    workdir = Path(tempfile.mkdtemp(prefix="casewatch-replicas-"))
    schema = Schema()
    broker = EmbeddedBroker(log_path=workdir / "tansu.log")
    broker.start()
    judge = FakeJudgeServer(latency=args.latency, record=False).start()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        create_topics(broker.bootstrap, [TOPIC], args.partitions, dlq_suffix=".dlq")
        produce(broker.bootstrap, args.turns, args.partitions)
        store = Store(schema.url)
        store.migrate()
        group = f"replicas-{uuid.uuid4().hex[:6]}"
        cfgs = [
            config(workdir, broker.bootstrap, judge, schema.url, group, i, args.concurrency)
            for i in range(args.replicas)
        ]
        procs = [spawn(c, workdir / f"replica-{i}.log") for i, c in enumerate(cfgs)]

        def stored() -> int:
            if all(p.poll() is not None for p in procs):  # a config they refuse, say
                log = (workdir / "replica-0.log").read_text(errors="replace")
                raise SystemExit(f"every replica exited; replica-0.log ends:\n{log[-2000:]}")
            return counts(store)["turns"]

        deadline = time.monotonic() + args.max_seconds
        kills: list[dict[str, Any]] = []
        for k in range(args.kills):
            before = stored()
            if not wait_until(lambda b=before: stored() > b + 50, deadline - time.monotonic()):
                break
            time.sleep(rng.uniform(1.0, 3.0))
            if stored() >= args.turns:
                break
            procs[0].send_signal(signal.SIGKILL)
            procs[0].wait()
            kills.append({"kill": k, "stored": stored(), "requests": judge.request_count})
            procs[0] = spawn(cfgs[0], workdir / "replica-0.log")
        done = wait_until(lambda: stored() >= args.turns, max(1.0, deadline - time.monotonic()))
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(120)
        rows = counts(store)
        requests = judge.request_count
        store.close()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        judge.close()
        broker.stop()
        schema.drop()
    extra = requests - args.turns
    return {
        "seed": seed,
        "finished": done,
        "turns": args.turns,
        "stored_turns": rows["turns"],
        "stored_verdicts": rows["verdicts"],
        "kills": len(kills),
        "judge_requests": requests,
        "extra_calls": extra,
        "extra_calls_per_kill": round(extra / len(kills), 2) if kills else None,
        "concurrency": args.concurrency,
        "workdir": str(workdir),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=3000)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--kills", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.05, help="judge reply latency, s")
    parser.add_argument("--concurrency", type=int, default=8, help="daemon.concurrency")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--max-seconds", type=float, default=600.0, help="per run")
    args = parser.parse_args()
    results = []
    for r in range(args.runs):
        res = one_run(args, args.seed + r)
        results.append(res)
        print(
            f"run {r}: {res['kills']} kills, {res['judge_requests']} judge calls for "
            f"{res['turns']} turns ({res['stored_turns']} stored, {res['stored_verdicts']} "
            f"verdict rows): {res['extra_calls']} extra, {res['extra_calls_per_kill']} per kill "
            f"(daemon.concurrency {args.concurrency})",
            flush=True,
        )
    per_kill = [r["extra_calls_per_kill"] for r in results if r["extra_calls_per_kill"] is not None]
    summary = {
        "runs": results,
        "median_extra_calls_per_kill": statistics.median(per_kill) if per_kill else None,
        "concurrency": args.concurrency,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
