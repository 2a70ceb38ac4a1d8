"""Which broker the consumer talks to, and so whether the embedded broker's workarounds apply.

casewatch is written for Kafka's semantics (Apache Kafka, Confluent, MSK, Redpanda,
WarpStream). The embedded broker of the demo, the tests and the benches, Tansu 0.6, departs
from them in ways that wedge a consumer group, and the workarounds for that change what a
member does, so they are switched by ``kafka.broker_quirks`` (docs/kafka.md, "Broker quirks"):

- ``tansu``: a group that has not formed for ``SESSION_TIMEOUTS`` session timeouts is rejoined
  (Tansu can keep an evicted member as the leader of a forming group, and only the leader's
  SyncGroup forms it); the member whose id sorts first rejoins under the departed leader's id
  (``LeaderTakeover``), and a member leading the round it gives up stops without a LeaveGroup
  (``forget_membership``: Tansu keeps naming a leader that left mid-round, but expires one
  that just stops).
- ``none``: a plain Kafka consumer. A clean stop sends LeaveGroup (a dynamic member), no
  member ever takes another's id (Kafka answers UNKNOWN_MEMBER_ID), and a group is taken to be
  stuck only after the longest rebalance Kafka allows (``kafka_stuck_bound_s``), so a slow but
  legal rebalance is never torn down.
- ``auto`` (the default): ``tansu`` when the broker reports Tansu's cluster id, else ``none``.

Pure: the cluster id is read by the caller (``consumers._kafka.cluster_id``).
"""

from __future__ import annotations

from typing import Literal

BrokerQuirksSetting = Literal["auto", "tansu", "none"]

# The cluster id Tansu reports in every Metadata response unless started with another
# (``tansu broker --kafka-cluster-id``, default "tansu_cluster"); casewatch's embedded broker
# never sets one. Kafka's are random base64 UUIDs (22 characters), so the prefix cannot clash.
TANSU_CLUSTER_PREFIX = "tansu"

# With Tansu's quirks on: a group not formed for this many session timeouts is stuck (a
# healthy Tansu rebalance takes one join round: half a session timeout plus 3 s).
SESSION_TIMEOUTS = 3


def is_tansu(cluster_id: str | None) -> bool:
    """Whether a broker reporting ``cluster_id`` is Tansu (None: not known, so not Tansu)."""
    return bool(cluster_id) and str(cluster_id).lower().startswith(TANSU_CLUSTER_PREFIX)


def tansu_quirks(setting: BrokerQuirksSetting, cluster_id: str | None) -> bool:
    """Whether the Tansu workarounds are on for ``setting`` and the broker's cluster id."""
    if setting == "auto":
        return is_tansu(cluster_id)
    return setting == "tansu"


def kafka_stuck_bound_s(session_timeout_ms: int, max_poll_interval_ms: int) -> float:
    """How long a group may stay unformed on Kafka before it is taken to be stuck.

    A rebalance round may take the rebalance timeout (kafka-python sends max_poll_interval_ms:
    JoinGroup waits that long for every member to rejoin) plus a session timeout (SyncGroup
    waits for the leader, which is expelled only when its session times out); one more
    session timeout is margin for the heartbeat that notices. Anything shorter could tear down
    a rebalance Kafka would still finish.
    """
    return (max_poll_interval_ms + 2 * session_timeout_ms) / 1000


def tansu_stuck_bound_s(session_timeout_ms: int) -> float:
    return SESSION_TIMEOUTS * session_timeout_ms / 1000
