"""The one place that imports kafka-python: import shim, shared client options, error mapping.

kafka-python 3.0 loads its protocol schemas with ``importlib.resources.read_text``, which
emits a DeprecationWarning per schema on Python 3.11+. The warning is the library's, not ours,
and the test suite turns warnings into errors, so the import is done once here with exactly
that warning silenced. Import kafka-python through this module, never directly.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import structlog

from monitor.config.kafka import KafkaConfig
from monitor.errors import BrokerError, UnreadableBatchError

with warnings.catch_warnings():
    warnings.filterwarnings(
        "ignore", message=r"(read|open)_text is deprecated", category=DeprecationWarning
    )
    import kafka
    import kafka.consumer.fetcher
    import kafka.errors
    import kafka.net.inet
    import kafka.net.manager
    import kafka.net.transport
    from kafka import KafkaAdminClient as _LibraryAdminClient
    from kafka import KafkaConsumer as _LibraryConsumer
    from kafka import KafkaProducer as _LibraryProducer
    from kafka import TopicPartition as KafkaTopicPartition
    from kafka.consumer.subscription_state import AsyncConsumerRebalanceListener
    from kafka.future import Future as KafkaFuture
    from kafka.structs import OffsetAndMetadata

from consumers.records import TopicPartition

_log = structlog.get_logger(__name__)

__all__ = [
    "OPTIMISATIONS",
    "OPTIMISATIONS_ENV",
    "AsyncConsumerRebalanceListener",
    "KafkaAdminClient",
    "KafkaConsumer",
    "KafkaFuture",
    "KafkaProducer",
    "KafkaTopicPartition",
    "OffsetAndMetadata",
    "UnreadableBatchError",
    "any_reachable",
    "broker_errors",
    "client_options",
    "close_producer",
    "cluster_id",
    "from_kafka_tp",
    "install_connection_fixes",
    "io_loop",
    "kafka",
    "optimisation_on",
    "require_reachable",
    "to_kafka_tp",
    "wait_within",
    "workarounds_off",
]


def client_options(config: KafkaConfig) -> dict[str, Any]:
    """Connection and security options shared by consumer, producer and admin client."""
    options: dict[str, Any] = {
        "bootstrap_servers": list(config.bootstrap_servers),
        "client_id": config.client_id,
        "security_protocol": config.security_protocol,
    }
    if config.sasl_mechanism:
        options["sasl_mechanism"] = config.sasl_mechanism
    if config.sasl_username is not None:
        options["sasl_plain_username"] = config.sasl_username
    if config.sasl_password is not None:
        options["sasl_plain_password"] = config.sasl_password.get_secret_value()
    for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
        path = getattr(config, name)
        if path is not None:
            options[name] = str(path)
    return options


def to_kafka_tp(tp: TopicPartition) -> Any:
    return KafkaTopicPartition(tp.topic, tp.partition)


def from_kafka_tp(tp: Any) -> TopicPartition:
    return TopicPartition(str(tp.topic), int(tp.partition))


@contextmanager
def broker_errors(action: str, servers: list[str] | str) -> Iterator[None]:
    """Translate kafka-python failures into BrokerError naming what failed and where."""
    where = servers if isinstance(servers, str) else ",".join(servers)
    try:
        yield
    except kafka.errors.KafkaTimeoutError as exc:
        # Often raised bare (str: "KafkaTimeoutError: None"), which would say nothing more.
        detail = f" ({exc})" if any(a not in (None, "") for a in exc.args) else ""
        raise BrokerError(
            f"{action}: timed out talking to Kafka at {where}{detail}; check that the "
            "brokers are up and bootstrap_servers / security settings are right"
        ) from exc
    except kafka.errors.KafkaError as exc:
        raise BrokerError(f"{action}: Kafka at {where} failed: {exc}") from exc
    except (OSError, ValueError) as exc:
        # kafka-python raises ValueError for bad client configuration (e.g. SASL options).
        raise BrokerError(f"{action}: {type(exc).__name__}: {exc}") from exc


def _host_port(server: str) -> tuple[str, int]:
    host, sep, port = server.rpartition(":")
    if not sep or "]" in port:  # no port given (IPv6 literals are bracketed)
        return server.strip("[]"), 9092
    return host.strip("[]"), int(port)


def any_reachable(servers: list[str], timeout_s: float) -> bool:
    """Whether any bootstrap server accepts a TCP connection within ``timeout_s`` each."""
    return _attempt(servers, timeout_s) == "reachable"


def _attempt(servers: list[str], timeout_s: float) -> str:
    """``reachable``; ``refused_here`` when every server is on this machine and refused the
    connection (nothing listens on the port); else ``unreachable``."""
    refused_here = bool(servers)
    for server in servers:
        try:
            host_port = _host_port(server)
            with socket.create_connection(host_port, timeout=timeout_s):
                return "reachable"
        except ConnectionRefusedError:
            refused_here = refused_here and _on_this_machine(host_port[0])
        except (OSError, ValueError):
            refused_here = False
    return "refused_here" if refused_here else "unreachable"


def _on_this_machine(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# A broker on this machine that refuses connections is not running (a remote one may still be
# starting, or its network coming up): said after this grace, not after the whole timeout.
LOCAL_REFUSED_GRACE_S = 3.0


def require_reachable(servers: list[str], timeout_s: float) -> None:
    """Raise BrokerError unless a bootstrap server accepts connections within ``timeout_s``;
    within ``LOCAL_REFUSED_GRACE_S`` when every server is on this machine and refuses."""
    started = time.monotonic()
    deadline = started + timeout_s
    while (found := _attempt(servers, min(1.0, max(0.05, timeout_s)))) != "reachable":
        now = time.monotonic()
        if found == "refused_here" and now - started >= min(LOCAL_REFUSED_GRACE_S, timeout_s):
            raise BrokerError(
                f"cannot connect to any Kafka bootstrap server ({','.join(servers)}): "
                "connection refused, nothing listens there; start the broker, or point "
                "bootstrap_servers at where it runs"
            )
        if now >= deadline:
            raise BrokerError(
                f"cannot connect to any Kafka bootstrap server ({','.join(servers)}) within "
                f"{timeout_s:g} s; check that the brokers are up and bootstrap_servers is right"
            )
        time.sleep(0.2)


# Every private kafka-python name casewatch reads, writes, calls or replaces, all of them in
# consumers/_kafka*.py: the workarounds below, the group coordinator's (_kafka_group.py), the
# fetcher's (_kafka_fetch.py), and the two optimisations (_kafka_records.py, the record reader;
# _kafka_fetch_order.py, the fetch order). pyproject pins kafka-python to the exact version they
# were written against; tests/consumers/test_kafka_workarounds.py resolves each one on real
# objects, and each patch checks its own names when it is installed (a miss: one warning, then
# the library's own behaviour). An entry starts with what it is read from: a client class, or
# ``kafka`` for a module attribute, or ``DefaultRecordBatch`` / ``PartitionRecords`` for an
# instance of the record batch / the fetcher's per-partition reader.
_SOCK_CONNECT = "kafka.net.inet.KafkaNetSocket.sock_connect"
_MANAGER_CLOSE = "kafka.net.manager.KafkaConnectionManager.close"
_TRANSPORT_CLOSE = "kafka.net.transport.KafkaTCPTransport._close"
_TAKE = "kafka.consumer.fetcher.Fetcher.PartitionRecords.take"
_JOIN_RESPONSE = "KafkaConsumer._coordinator._process_join_group_response"
# consumers/_kafka_records.py: the fetcher's per-partition reader, replaced per consumer.
_UNPACK = "kafka.consumer.fetcher.Fetcher.PartitionRecords._unpack_records"
_UNCOMPRESS = "kafka.record.default_records.DefaultRecordBatch._maybe_uncompress"
_VARINT = "kafka.record.util.decode_varint"
_READER = "KafkaConsumer._fetcher.PartitionRecords"
_ABORTED_UP_TO = (
    "kafka.consumer.fetcher.Fetcher.PartitionRecords._consume_aborted_transactions_up_to"
)
_ABORT_MARKER = "kafka.consumer.fetcher.Fetcher.PartitionRecords._contains_abort_marker"
_BATCH_ABORTED = "kafka.consumer.fetcher.Fetcher.PartitionRecords._is_batch_aborted"
# The record batch's layout, read (and ``_pos`` written) by the reader, and the reader's own
# state it keeps as the library's does (written: the position and the fetch metrics' counts).
_BATCH_BUFFER = "DefaultRecordBatch._buffer"
_BATCH_POS = "DefaultRecordBatch._pos"
_BATCH_HEADER = "DefaultRecordBatch._header_data"
READER_STATE: tuple[str, ...] = (
    "PartitionRecords.next_fetch_offset",
    "PartitionRecords.leader_epoch",
    "PartitionRecords.records_read",
    "PartitionRecords.bytes_read",
    "PartitionRecords.check_crcs",
    "PartitionRecords.isolation_level",
    "PartitionRecords.aborted_producer_ids",
)
# consumers/_kafka_fetch_order.py: a fetch response's partitions reordered, per consumer.
_HANDLE_FETCH = "KafkaConsumer._fetcher._handle_fetch_response"
_ISOLATION = "KafkaConsumer._fetcher._isolation_level"
# Read or written, not called (the others are methods).
_CLUSTER_ID = "KafkaConsumer._cluster.cluster_id"
_NEXT_RECORDS = "KafkaConsumer._fetcher._next_partition_records"
_PARKED_RECORDS = "KafkaConsumer._fetcher._paused_partition_records"
_FETCHED_RECORDS = "KafkaConsumer._fetcher.fetched_records"
_PAUSED_FETCHES = "KafkaConsumer._fetcher._paused_completed_fetches"
_NEXT_EXCEPTION = "KafkaConsumer._fetcher._next_in_line_exception_metadata"
_FETCH_CONFIG = "KafkaConsumer._fetcher.config"
VALUE_ATTRIBUTES: tuple[str, ...] = (
    _CLUSTER_ID,
    _NEXT_RECORDS,
    _PARKED_RECORDS,
    _PAUSED_FETCHES,
    _NEXT_EXCEPTION,
    _FETCH_CONFIG,
    _ISOLATION,
    _BATCH_BUFFER,
    _BATCH_POS,
    _BATCH_HEADER,
    *READER_STATE,
)
PRIVATE_ATTRIBUTES: tuple[str, ...] = (
    "KafkaConsumer._coordinator.need_rejoin",
    "KafkaConsumer._coordinator.coordinator_unknown",
    _JOIN_RESPONSE,
    "KafkaConsumer._coordinator.poll",
    "KafkaConsumer._coordinator._manager.wait_for",
    "KafkaConsumer._coordinator._manager.call_soon",
    "KafkaProducer._sender.force_close",
    _SOCK_CONNECT,
    _MANAGER_CLOSE,
    _TRANSPORT_CLOSE,
    "KafkaConsumer._client._manager._conns.values",
    _TAKE,
    _UNPACK,
    _UNCOMPRESS,
    _VARINT,
    _READER,
    _ABORTED_UP_TO,
    _ABORT_MARKER,
    _BATCH_ABORTED,
    _HANDLE_FETCH,
    _FETCHED_RECORDS,
    "KafkaConsumer._fetcher._paused_partition_records.pop",
    "KafkaConsumer._coordinator.stable",
    "KafkaConsumer._coordinator.reset_generation",
    "KafkaAdminClient._process_acl_operations",
    *VALUE_ATTRIBUTES,
)
# The optional patches: the two optimisations, which change how fast records arrive, never which
# records arrive or what is committed. ``CASEWATCH_KAFKA_OPTIMISATIONS=off`` leaves every
# consumer with the library's own reader and fetch order (docs/kafka.md). The workarounds above
# fix library bugs (a socket or a thread left behind, a poll that spins on an unreadable
# batch) and stay on.
OPTIMISATIONS_ENV = "CASEWATCH_KAFKA_OPTIMISATIONS"
OPTIMISATIONS: tuple[str, ...] = ("read_raw_records", "refetch_left_out")
_warned: set[str] = set()
_switched_off: set[str] = set()


def _fallback(workaround: str, attribute: str) -> None:
    if workaround not in _warned:
        _warned.add(workaround)
        _log.warning(
            "kafka-python workaround not applied: private attribute missing",
            workaround=workaround,
            attribute=attribute,
            kafka_python=kafka.__version__,
        )


def workarounds_off() -> frozenset[str]:
    """The workarounds and optimisations that fell back to the library's own behaviour in this
    process (each warned once), for a status to report."""
    return frozenset(_warned)


def optimisation_on(name: str) -> bool:
    """Whether the optional patch ``name`` (one of ``OPTIMISATIONS``) may be installed: read
    from ``OPTIMISATIONS_ENV`` at each installation, so a consumer opened after the variable
    changed follows it. Off is logged once per patch."""
    value = os.environ.get(OPTIMISATIONS_ENV, "").strip().lower()
    if value not in ("off", "on", ""):
        _fallback(f"{OPTIMISATIONS_ENV}={value}", "expected 'on' or 'off'; kept on")
    if value != "off":
        return True
    if name not in _switched_off:
        _switched_off.add(name)
        _log.info("kafka-python optimisation off", optimisation=name, switch=OPTIMISATIONS_ENV)
    return False


def _close_failed_connects() -> None:
    """Close the socket of a failed connection attempt.

    kafka-python 3.0.12's ``KafkaNetSocket.sock_connect`` raises on a refused or timed-out
    connect without closing the socket it was given, so while a broker is down every retry
    leaves a socket to the garbage collector (a ResourceWarning each). Class-level: the socket
    is made deep inside the client.
    """
    cls = getattr(kafka.net.inet, "KafkaNetSocket", None)
    original = getattr(cls, "sock_connect", None)
    if cls is None or original is None:
        _fallback("close_failed_connects", _SOCK_CONNECT)
        return
    if getattr(original, "closes_on_failure", False):
        return

    async def sock_connect(
        self: Any, net: Any, sock: Any, sockaddr: Any, timeout_at: Any = None
    ) -> Any:
        try:
            return await original(self, net, sock, sockaddr, timeout_at=timeout_at)
        except BaseException:
            sock.close()
            raise

    sock_connect.closes_on_failure = True  # type: ignore[attr-defined]
    cls.sock_connect = sock_connect


def _close_sockets_with_the_client() -> None:
    """Close every connection's socket when a whole client closes, sent or not.

    kafka-python 3.0.12's ``KafkaConnectionManager.close`` closes each connection gracefully: a
    transport still holding unsent bytes (the ApiVersions request of a connection being set up,
    say) keeps its socket open until they are flushed. The client stops its I/O loop right
    after, so nothing is ever flushed and the socket is left to the garbage collector: a
    ResourceWarning raised in whichever test happens to be running when it is collected, and a
    descriptor held until then in the daemon. A closing client has nothing left to send, so
    whatever the graceful close left open is closed at once. Class-level, as the socket fix.
    """
    manager_cls = getattr(getattr(kafka.net, "manager", None), "KafkaConnectionManager", None)
    original = getattr(manager_cls, "close", None)
    transport_cls = getattr(getattr(kafka.net, "transport", None), "KafkaTCPTransport", None)
    if manager_cls is None or original is None:
        _fallback("close_sockets_with_the_client", _MANAGER_CLOSE)
        return
    if transport_cls is None or not hasattr(transport_cls, "_close"):
        _fallback("close_sockets_with_the_client", _TRANSPORT_CLOSE)
        return
    if getattr(original, "closes_every_socket", False):
        return

    def close(self: Any, node_id: Any = None, timeout_ms: Any = None) -> Any:
        if node_id is not None or getattr(self, "closed", False):
            return original(self, node_id=node_id, timeout_ms=timeout_ms)
        conns = getattr(self, "_conns", None)
        if conns is None:
            _fallback("close_sockets_with_the_client", "KafkaConsumer._client._manager._conns")
            return original(self, node_id=node_id, timeout_ms=timeout_ms)
        transports = [c.transport for c in list(conns.values()) if getattr(c, "transport", None)]
        try:
            return original(self, node_id=node_id, timeout_ms=timeout_ms)
        finally:
            for transport in transports:
                transport._close()  # idempotent: a no-op where the graceful close finished

    close.closes_every_socket = True  # type: ignore[attr-defined]
    manager_cls.close = close


def install_connection_fixes() -> None:
    """The two connection fixes, on kafka-python's classes: installed by the first client
    casewatch builds (the clients below), not at import, and once (each fix checks its names
    then and is idempotent)."""
    _close_failed_connects()
    _close_sockets_with_the_client()


# The clients every casewatch module and test builds: kafka-python's, with the connection fixes
# in place before the first socket is opened.
class KafkaConsumer(_LibraryConsumer):  # type: ignore[misc]
    def __init__(self, *topics: Any, **configs: Any) -> None:
        install_connection_fixes()
        super().__init__(*topics, **configs)


class KafkaProducer(_LibraryProducer):  # type: ignore[misc]
    def __init__(self, **configs: Any) -> None:
        install_connection_fixes()
        super().__init__(**configs)


class KafkaAdminClient(_LibraryAdminClient):  # type: ignore[misc]
    def __init__(self, **configs: Any) -> None:
        install_connection_fixes()
        super().__init__(**configs)


async def wait_within(consumer: Any, future: Any, timeout_s: float) -> Any:
    """Await a kafka-python future on ``consumer``'s I/O loop for at most ``timeout_s``
    (KafkaTimeoutError after that; the request itself is not cancelled).

    kafka-python 3.0.12 runs the rebalance listener of ``close()`` without any time limit, so a
    commit awaited there against an unreachable coordinator would hold ``close()`` forever.
    """
    manager = getattr(getattr(consumer, "_coordinator", None), "_manager", None)
    if manager is None or not hasattr(manager, "wait_for"):
        _fallback("wait_within", "KafkaConsumer._coordinator._manager.wait_for")
        return await future
    return await manager.wait_for(future, max(1, int(timeout_s * 1000)))


def io_loop(consumer: Any) -> Any | None:
    """The manager of ``consumer``'s I/O loop, whose ``call_soon`` runs a function on the I/O
    thread from any thread (a rebalance listener's result is handed back through it); None
    when it is missing (the listener then runs its callbacks on the I/O thread itself)."""
    manager = getattr(getattr(consumer, "_coordinator", None), "_manager", None)
    if manager is None or not hasattr(manager, "call_soon"):
        _fallback("io_loop", "KafkaConsumer._coordinator._manager.call_soon")
        return None
    return manager


def close_producer(producer: Any, timeout_s: float) -> bool:
    """Close a KafkaProducer whatever the broker does, within ``timeout_s`` for the flush and as
    much for its sender thread to exit; False when records had to be dropped undelivered (their
    futures fail).

    kafka-python 3.0.12's ``close(timeout)`` flushes first, and when that flush times out (broker
    unreachable) it raises before stopping its sender thread, which keeps retrying. Here the
    flush is bounded, the sender is told to drop what it could not deliver, and the close that
    follows has nothing left to wait for.
    """
    delivered = True
    try:
        producer.flush(timeout=timeout_s)
    except kafka.errors.KafkaTimeoutError:
        delivered = False
        sender = getattr(producer, "_sender", None)
        if sender is not None and hasattr(sender, "force_close"):
            sender.force_close()  # fails the pending batches as the thread exits
            sender.join(timeout_s)
        else:
            _fallback("close_producer", "KafkaProducer._sender.force_close")
    # With timeout 0, kafka-python's close() only flags its sender thread to stop and returns:
    # the thread closes the producer's sockets later, on its own, so a caller that moves on
    # leaves them open for a while, or to the garbage collector (an "unclosed socket" warning
    # in whichever test runs then). After a flush that delivered everything, close() waits for
    # the thread, which has nothing left to send, so the sockets are closed before this returns;
    # after a failed flush the thread was already stopped and joined above.
    try:
        producer.close(timeout=timeout_s if delivered else 0)
    except kafka.errors.KafkaTimeoutError:
        delivered = False  # the sender did not exit in time; it is a daemon thread
    return delivered


def cluster_id(consumer: Any, topic: str) -> str | None:
    """The cluster id the brokers report (Metadata), asked for ``topic`` if not known yet; None
    when it cannot be told. Only used to recognise a broker (``consumers.broker_quirks``)."""
    cluster = getattr(consumer, "_cluster", None)
    if cluster is None or not hasattr(cluster, "cluster_id"):
        _fallback("cluster_id", _CLUSTER_ID)
        return None
    if cluster.cluster_id is None:
        consumer.partitions_for_topic(topic)  # a Metadata request when nothing is cached
    return str(cluster.cluster_id) if cluster.cluster_id else None
