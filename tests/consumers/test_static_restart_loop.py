"""A static member restarted again and again on the embedded broker (issue 24): the group
resumes by itself.

Tansu 0.6 wedges such a group now and then (a restart within its 3 s hold leaves an expired
member as leader and every SyncGroup failing, or a static member whose id it forgets a second
after each join). The members notice the group has not formed for 3 session timeouts, leave it
and rejoin dynamically (consumers/group_health.py); this checks that all partitions end up
owned again without anyone stepping in.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from consumers.tansu import EmbeddedBroker, create_topics
from tests.monitor.stream.test_daemon import wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 4


class Member:
    def __init__(self, bootstrap: str, topic: str, group: str, name: str, log: Path) -> None:
        self.log = log
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        with log.open("ab") as fh:
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
                stderr=subprocess.DEVNULL,
                env=env,
            )

    def lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()

    def assignment(self) -> set[int]:
        last = [x for x in self.lines() if x.startswith("assignment")]
        return {int(p) for p in last[-1].split()[1:]} if last else set()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def test_a_static_restart_loop_resumes_by_itself(
    tansu_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    bootstrap = tansu_broker.bootstrap
    topic = f"restarts.{uuid.uuid4().hex[:8]}"
    create_topics(bootstrap, [topic], PARTITIONS)
    group = f"restarts-{uuid.uuid4().hex[:6]}"
    logs = {name: tmp_path / f"{name}.log" for name in ("r0", "r1")}
    members = {name: Member(bootstrap, topic, group, name, log) for name, log in logs.items()}
    rng = random.Random(3)  # a schedule that wedged Tansu without the rejoin (2026-11-25)
    try:
        for _ in range(6):
            time.sleep(rng.uniform(4, 10))  # the scenario: a crash loop's rhythm
            members["r0"].kill()
            time.sleep(rng.uniform(0.2, 3.0))  # back within Tansu's 3 s hold, or just after
            members["r0"] = Member(bootstrap, topic, group, "r0", logs["r0"])

        def resumed() -> bool:
            owned = [m.assignment() for m in members.values()]
            return all(owned) and set().union(*owned) == set(range(PARTITIONS))

        # A liveness bound: the rejoin comes after 3 session timeouts (18 s) and its own round.
        wait_for(resumed, timeout=180, what="every partition owned again")
    finally:
        for member in members.values():
            member.kill()
    rejoins = sum(x == "rejoined" for log in logs.values() for x in log.read_text().splitlines())
    print(f"rejoins of a group that did not form: {rejoins}")
