"""Static members in a crash loop on the embedded broker: does the group resume by itself?

Two members (``tests/consumers/group_member.py``, each a real kafka-python consumer under a
``group_instance_id``) share a 4-partition topic on Tansu 0.6; one is SIGKILLed and restarted
six times on a crash loop's rhythm (4-10 s apart, back within 0.2-3 s: inside Tansu's 3 s hold
or just after), which can wedge the group on Tansu (consumers/group_health.py says how). Then
the run waits up to ``--bound`` seconds for every partition to be owned again, the members
rejoining dynamically on their own when the group does not form. Reported per run: resumed or
not, seconds from the last restart to resumption, and the rejoins the members made.

This is a measurement, not a test: whether Tansu wedges, and how long the rejoins take, depends
on timing, and on a loaded machine the group has been seen not to form within 180 s.

    .venv/bin/python bench/static_restart_loop.py --runs 5
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from consumers.tansu import EmbeddedBroker, create_topics  # noqa: E402

PARTITIONS = 4


class Member:
    def __init__(self, bootstrap: str, topic: str, group: str, name: str, log: Path) -> None:
        self.log = log
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        with log.open("ab") as fh, log.with_suffix(".err").open("ab") as err:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.consumers.group_member",
                    bootstrap,
                    topic,
                    group,
                    name,
                ],
                stdout=fh,
                stderr=err,
                env=env,
                cwd=ROOT,
            )

    def assignment(self) -> set[int]:
        lines = self.log.read_text(errors="replace").splitlines()
        last = [x for x in lines if x.startswith("assignment")]
        return {int(p) for p in last[-1].split()[1:]} if last else set()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def one_run(seed: int, bound: float, workdir: Path) -> tuple[bool, float, int]:
    rng = random.Random(seed)
    with EmbeddedBroker(log_path=workdir / "tansu.log") as broker:
        topic = f"restarts.{uuid.uuid4().hex[:8]}"
        create_topics(broker.bootstrap, [topic], PARTITIONS)
        group = f"restarts-{uuid.uuid4().hex[:6]}"
        logs = {name: workdir / f"{name}.log" for name in ("r0", "r1")}
        members = {n: Member(broker.bootstrap, topic, group, n, log) for n, log in logs.items()}
        try:
            for _ in range(6):
                time.sleep(rng.uniform(4, 10))
                members["r0"].kill()
                time.sleep(rng.uniform(0.2, 3.0))
                members["r0"] = Member(broker.bootstrap, topic, group, "r0", logs["r0"])
            start = time.monotonic()
            resumed = False
            while time.monotonic() - start < bound:
                owned = [m.assignment() for m in members.values()]
                if all(owned) and set().union(*owned) == set(range(PARTITIONS)):
                    resumed = True
                    break
                time.sleep(0.5)
            took = time.monotonic() - start
        finally:
            for member in members.values():
                member.kill()
        rejoins = sum(
            x == "rejoined" for log in logs.values() for x in log.read_text().splitlines()
        )
    return resumed, took, rejoins


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--bound", type=float, default=300.0, help="seconds to wait per run")
    parser.add_argument("--seed", type=int, default=3, help="first run's kill schedule")
    args = parser.parse_args()
    results = []
    for i in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="casewatch-restarts-") as tmp:
            resumed, took, rejoins = one_run(args.seed + i, args.bound, Path(tmp))
        results.append((resumed, took))
        state = f"resumed after {took:.0f} s" if resumed else f"NOT resumed in {args.bound:.0f} s"
        print(f"run {i + 1}: {state}, {rejoins} rejoins", flush=True)
    times = [t for ok, t in results if ok]
    ok = len(times)
    median = f", median {statistics.median(times):.0f} s" if times else ""
    print(f"resumed by itself: {ok} of {args.runs}{median}")


if __name__ == "__main__":
    main()
