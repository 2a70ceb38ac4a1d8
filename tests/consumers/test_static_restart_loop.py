"""A static member restarted again and again on the embedded broker: the group resumes by
itself (Tansu-quirks group: the members run with ``broker_quirks="tansu"``).

Tansu 0.6 wedges such a group now and then: its heartbeat check evicts a restarted leader while
that waits out its 3 s static hold, and keeps naming it as the leader, so every SyncGroup fails
(consumers/_kafka_group.py); or it forgets a static member's id a second after each join. The
members notice that the group has not formed for 3 session timeouts; one takes the departed
leader's place, the others rejoin dynamically. This checks that every partition ends up owned
again without anyone stepping in. ``bench/static_restart_loop.py`` runs the same loop
repeatedly and reports how long resumption took.
"""

from __future__ import annotations

import random
import time
import uuid
from pathlib import Path

import pytest

from consumers.tansu import EmbeddedBroker, create_topics
from tests.consumers.group_member import MemberProcess
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.tansu_quirks]

PARTITIONS = 4


def test_a_static_restart_loop_resumes_by_itself(
    tansu_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    bootstrap = tansu_broker.bootstrap
    topic = f"restarts.{uuid.uuid4().hex[:8]}"
    create_topics(bootstrap, [topic], PARTITIONS)
    group = f"restarts-{uuid.uuid4().hex[:6]}"
    logs = {name: tmp_path / f"{name}.log" for name in ("r0", "r1")}
    members = {n: MemberProcess(bootstrap, topic, group, n, log) for n, log in logs.items()}
    rng = random.Random(3)  # a schedule that wedged Tansu without the rejoin (2026-11-25)
    try:
        for _ in range(6):
            # The scenario itself, not a wait: a crash loop's rhythm, each restart back within
            # Tansu's 3 s static hold or just after it.
            time.sleep(rng.uniform(4, 10))
            members["r0"].kill()
            time.sleep(rng.uniform(0.2, 3.0))
            members["r0"] = MemberProcess(bootstrap, topic, group, "r0", logs["r0"])

        def resumed() -> bool:
            owned = [m.assignment() for m in members.values()]
            return all(owned) and set().union(*owned) == set(range(PARTITIONS))

        # A liveness bound, not a speed target: noticing takes 3 session timeouts (18 s), each
        # rejoin its own join round, and a busy core stretches both.
        wait_for(resumed, timeout=300, what="every partition owned again")
    finally:
        for member in members.values():
            member.kill()
