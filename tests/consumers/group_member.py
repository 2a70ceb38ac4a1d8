"""Consumer-group members for the group tests and benchmarks; run as a module, one member in a
process of its own:

    python -m tests.consumers.group_member BOOTSTRAP TOPIC GROUP INSTANCE_ID

Polls a ``KafkaTurnSource`` (static membership under INSTANCE_ID; session 6 s) forever and
prints ``assignment <partitions>`` each time its assignment changes, ``rejoined`` at each
rejoin of a group that did not form. ``MemberProcess`` starts one and reads what it printed;
``leave_while_leading`` wedges a group on the embedded broker the shortest way.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

from consumers._kafka import install_connection_fixes, kafka
from monitor.config.kafka import KafkaConfig
from monitor.runtime.processes import spawn_logged

ROOT = Path(__file__).resolve().parents[2]
# Short enough for a test to see a group come apart and form again within a minute or two.
SESSION_MS = 6000


def member_config(bootstrap: str, topic: str, group: str, **kw: Any) -> KafkaConfig:
    """A consumer-group member's settings, with the short session the group tests use."""
    return KafkaConfig(
        bootstrap_servers=[bootstrap],
        topics=[topic],
        group_id=group,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=1000,
        max_poll_interval_ms=SESSION_MS,
        **kw,
    )


def leave_while_leading(bootstrap: str, topic: str, group: str) -> str:
    """Join ``group`` (empty, so this member leads it) and leave before the round ends; the
    member id Tansu goes on naming as the leader."""
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.net.compat import KafkaNetClient
    from kafka.protocol.consumer.group import JoinGroupRequest, LeaveGroupRequest

    install_connection_fixes()  # a bare library client: not one of consumers._kafka's
    client = KafkaNetClient(bootstrap_servers=bootstrap)
    try:
        client.check_version()
        node = next(iter(client.cluster.brokers())).node_id
        protocol = JoinGroupRequest.JoinGroupRequestProtocol(
            name="range", metadata=RangePartitionAssignor.metadata({topic})
        )

        def join(member_id: str) -> Any:
            request = JoinGroupRequest(
                group_id=group,
                session_timeout_ms=SESSION_MS,
                rebalance_timeout_ms=SESSION_MS,
                member_id=member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocols=[protocol],
                max_version=7,
            )
            return client.send_and_receive(node, request)

        first = join("")
        assert first.error_code == kafka.errors.MemberIdRequiredError.errno
        joined = join(first.member_id)
        assert joined.error_code == 0
        assert joined.leader == joined.member_id  # it leads the forming group
        me = LeaveGroupRequest.MemberIdentity(member_id=joined.member_id, group_instance_id=None)
        left = client.send_and_receive(
            node, LeaveGroupRequest(group_id=group, member_id=joined.member_id, members=[me])
        )
        assert left.error_code == 0
        return str(joined.member_id)
    finally:
        client.close()


class MemberProcess:
    """A member started as ``python -m tests.consumers.group_member`` through
    ``spawn_logged`` (it dies with the test run); its output, the source's log lines and its
    stderr go to ``log``."""

    def __init__(self, bootstrap: str, topic: str, group: str, name: str, log: Path) -> None:
        self.log = log
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
        env = {"PYTHONUNBUFFERED": "1", "PYTHONPATH": path}
        argv = [sys.executable, "-m", "tests.consumers.group_member", bootstrap, topic, group, name]
        with log.open("ab") as out:
            self.proc = spawn_logged(argv, out, cwd=ROOT, env=env)

    def lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()

    def assignment(self) -> set[int]:
        last = [x for x in self.lines() if x.startswith("assignment")]
        return {int(p) for p in last[-1].split()[1:]} if last else set()

    def rejoins(self) -> int:
        return sum(x == "rejoined" for x in self.lines())

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def main() -> None:
    from consumers.kafka_source import KafkaTurnSource

    bootstrap, topic, group, name = sys.argv[1:5]
    # Run against the embedded broker to show its wedges and the workarounds for them.
    config = member_config(bootstrap, topic, group, group_instance_id=name, broker_quirks="tansu")
    source = KafkaTurnSource(config)
    source.set_rejoin_listener(lambda: print("rejoined", flush=True))
    last: list[int] | None = None
    while True:
        source.poll(0.2, 100)
        now = sorted(tp.partition for tp in source.assignment())
        if now != last:
            print("assignment", " ".join(map(str, now)), flush=True)
            last = now


if __name__ == "__main__":
    main()
