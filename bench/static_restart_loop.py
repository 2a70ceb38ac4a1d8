"""Static members in a crash loop on the embedded broker: does the group resume by itself?

Two members (``tests/consumers/group_member.py``, each a real kafka-python consumer under a
``group_instance_id``) share a 4-partition topic on Tansu 0.6; one is SIGKILLed and restarted
six times on a crash loop's rhythm (4-10 s apart, back within 0.2-3 s: inside Tansu's 3 s hold
or just after), which can wedge the group on Tansu (consumers/_kafka_group.py says how). Then
the run waits up to ``--bound`` seconds for every partition to be owned again, the members
recovering on their own when the group does not form: one takes the place of a leader that is
no longer a member, the others rejoin dynamically. Reported per run: resumed or not, seconds
from the last restart to resumption, the rejoins the members made and how many of them took a
departed leader's place. ``--busy N`` keeps N processes spinning meanwhile (a loaded machine).

``tests/consumers/test_static_restart_loop.py`` runs one such loop in the suite.

    .venv/bin/python bench/static_restart_loop.py --runs 6 --busy 2
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from consumers.tansu import EmbeddedBroker, create_topics  # noqa: E402
from tests.consumers.group_member import MemberProcess  # noqa: E402

PARTITIONS = 4


TOOK_OVER = "rejoining under the leader's member id"


def one_run(seed: int, bound: float, workdir: Path) -> tuple[bool, float, int, int]:
    rng = random.Random(seed)
    with EmbeddedBroker(log_path=workdir / "tansu.log") as broker:
        topic = f"restarts.{uuid.uuid4().hex[:8]}"
        create_topics(broker.bootstrap, [topic], PARTITIONS)
        group = f"restarts-{uuid.uuid4().hex[:6]}"
        logs = {name: workdir / f"{name}.log" for name in ("r0", "r1")}
        members = {
            n: MemberProcess(broker.bootstrap, topic, group, n, log) for n, log in logs.items()
        }
        try:
            for _ in range(6):
                time.sleep(rng.uniform(4, 10))
                members["r0"].kill()
                time.sleep(rng.uniform(0.2, 3.0))
                members["r0"] = MemberProcess(broker.bootstrap, topic, group, "r0", logs["r0"])
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
        lines = [x for log in logs.values() for x in log.read_text(errors="replace").splitlines()]
    rejoins = sum(x == "rejoined" for x in lines)
    took_over = sum(TOOK_OVER in x for x in lines)
    return resumed, took, rejoins, took_over


def _spin() -> None:
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--bound", type=float, default=300.0, help="seconds to wait per run")
    parser.add_argument("--seed", type=int, default=3, help="first run's kill schedule")
    parser.add_argument("--busy", type=int, default=0, help="processes spinning meanwhile")
    parser.add_argument("--keep", type=Path, help="keep each run's logs under this directory")
    args = parser.parse_args()
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.busy)]
    for spinner in spinners:
        spinner.start()
    results = []
    try:
        for i in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="casewatch-restarts-") as tmp:
                workdir = Path(tmp) if args.keep is None else args.keep / f"run-{i + 1}"
                workdir.mkdir(parents=True, exist_ok=True)
                resumed, took, rejoins, took_over = one_run(args.seed + i, args.bound, workdir)
            results.append((resumed, took))
            state = (
                f"resumed after {took:.0f} s" if resumed else f"NOT resumed in {args.bound:.0f} s"
            )
            print(
                f"run {i + 1}: {state}, {rejoins} rejoins, {took_over} as the departed leader",
                flush=True,
            )
    finally:
        for spinner in spinners:
            spinner.terminate()
    times = [t for ok, t in results if ok]
    median = f", median {statistics.median(times):.0f} s, max {max(times):.0f} s" if times else ""
    print(f"resumed by itself: {len(times)} of {args.runs}{median} (busy processes: {args.busy})")


if __name__ == "__main__":
    main()
