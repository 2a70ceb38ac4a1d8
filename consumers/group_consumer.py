"""A kafka-python consumer of the group as the Kafka source opens one (at start, and again at
each rejoin), and which broker it talks to.

Offsets are committed only when the pipeline says so (``enable_auto_commit=False``), so a
message is never marked read before it is finished. A dynamic member leaves the group on
``close()``; a static one (``group_instance_id``) stays until its session times out, so its
restart takes the partitions back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from consumers._kafka import KafkaConsumer, broker_errors, client_options, cluster_id
from consumers._kafka_fetch import fail_unreadable_batches, release_parked_records
from consumers._kafka_fetch_order import refetch_left_out
from consumers._kafka_records import read_raw_records
from consumers.broker_quirks import tansu_quirks
from monitor.config.kafka import KafkaConfig
from monitor.errors import BrokerError

log = structlog.get_logger(__name__)


def subscribed_consumer(
    config: KafkaConfig,
    group_instance_id: str | None,
    listener: Callable[[Any], Any],
    *,
    connect_timeout_s: float,
    close_timeout_s: float,
) -> Any:
    """A consumer of the group, subscribed to the topics with ``listener(consumer)`` as its
    rebalance listener; ``group_instance_id`` None makes it a dynamic member."""
    servers = list(config.bootstrap_servers)
    with broker_errors("connecting the consumer", servers):
        consumer = KafkaConsumer(
            **client_options(config),
            group_id=config.group_id,
            enable_auto_commit=False,
            auto_offset_reset=config.auto_offset_reset,
            session_timeout_ms=config.session_timeout_ms,
            heartbeat_interval_ms=config.heartbeat_interval_ms,
            max_poll_interval_ms=config.max_poll_interval_ms,
            max_poll_records=config.max_poll_records,
            fetch_max_wait_ms=config.fetch_max_wait_ms,
            bootstrap_timeout_ms=int(connect_timeout_s * 1000),
            group_instance_id=group_instance_id,
        )
    # The optimisations first (each optional, checked as it installs), then the guard on the
    # reader the consumer ends up with: an unreadable batch held, not spun on.
    read_raw_records(consumer)  # RawMessage records, read at a third of the library's cost
    refetch_left_out(consumer)  # no fetch round trip waited for after each full response
    fail_unreadable_batches(consumer)
    release_parked_records(consumer)  # a partition resumed after a pause is read again
    try:
        with broker_errors("subscribing", servers):
            consumer.subscribe(topics=config.topic_names, listener=listener(consumer))
    except BaseException:  # not left to the garbage collector with its sockets open
        consumer.close(autocommit=False, timeout_ms=int(close_timeout_s * 1000))
        raise
    return consumer


def has_tansu_quirks(consumer: Any, config: KafkaConfig) -> bool:
    """Whether the embedded broker's workarounds are on for ``consumer``'s brokers
    (``kafka.broker_quirks``; ``auto`` asks them for their cluster id)."""
    setting = config.broker_quirks
    found = None
    if setting == "auto":
        try:
            with broker_errors("asking the brokers for the cluster id", config.bootstrap_servers):
                found = cluster_id(consumer, config.topic_names[0])
        except BrokerError as exc:  # not Tansu's then: Kafka's semantics are the safe side
            log.warning("cannot tell which broker this is; quirks off", error=str(exc))
    on = tansu_quirks(setting, found)
    log.info("broker quirks", setting=setting, cluster_id=found, tansu=on)
    return on
