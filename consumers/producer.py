"""The one way casewatch builds a Kafka producer (the dead-letter sink, ``casewatch produce``,
the demo's traffic): the client options of the settings, a request size that fits the largest
record the settings allow, failures to connect as ``BrokerError`` naming what was connecting.
"""

from __future__ import annotations

from typing import Any

from consumers._kafka import KafkaProducer, broker_errors, client_options, require_reachable
from monitor.config.kafka import KafkaConfig

# Room for key, headers and batch framing on top of the value inside one produce request.
REQUEST_OVERHEAD_BYTES = 64 * 1024


def open_producer(
    what: str,
    servers: list[str],
    config: KafkaConfig | None = None,
    *,
    connect_timeout_s: float | None = None,
    **options: Any,
) -> Any:
    """A producer on ``servers`` (``what`` names it in errors: "the dead-letter producer").
    With ``config``: its connection and security options, and a request size for its largest
    record; ``options`` are kafka-python's, on top. With ``connect_timeout_s``: a broker must
    accept a connection within it first (else BrokerError at once, not a minute of retries)."""
    if connect_timeout_s is not None:
        require_reachable(servers, connect_timeout_s)
    settings: dict[str, Any] = {}
    if config is not None:
        settings = {
            **client_options(config),
            "max_request_size": config.max_message_bytes + REQUEST_OVERHEAD_BYTES,
        }
    with broker_errors(f"connecting {what}", servers):
        return KafkaProducer(**{**settings, **options, "bootstrap_servers": servers})


__all__ = ["REQUEST_OVERHEAD_BYTES", "open_producer"]
