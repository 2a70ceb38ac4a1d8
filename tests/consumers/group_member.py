"""One consumer-group member in a process of its own, for restart-loop tests:

    python -m tests.consumers.group_member BOOTSTRAP TOPIC GROUP INSTANCE_ID

Polls a ``KafkaTurnSource`` (static membership under INSTANCE_ID; session 6 s) forever and
prints ``assignment <partitions>`` each time its assignment changes, ``rejoined`` at each
rejoin of a group that did not form.
"""

from __future__ import annotations

import sys

from consumers.kafka_source import KafkaTurnSource
from monitor.settings import KafkaConfig


def main() -> None:
    bootstrap, topic, group, name = sys.argv[1:5]
    config = KafkaConfig(
        bootstrap_servers=[bootstrap],
        topics=[topic],
        group_id=group,
        group_instance_id=name,
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
        max_poll_interval_ms=6000,
    )
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
