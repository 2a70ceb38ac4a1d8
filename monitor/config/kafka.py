"""The ``kafka`` section: the cluster, the topics to read (each with the format of its
records) and the consumer group. Read by ``consumers`` (the Kafka source, the dead-letter
sink, the producer) and the daemon.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator

from monitor.config.section import Section

# How a topic's records are read: casewatch's own turn event, OTLP trace batches as the
# OpenTelemetry Collector's Kafka exporter writes them, or any JSON shape through `mapping`.
TopicFormat = Literal["casewatch", "otlp_proto", "otlp_json", "mapped"]


# What a topic carries: assistant turns (or the spans they come from), or outcome events
# (end-user feedback and case outcomes, ``monitor/schema/outcome.py``).
TopicKind = Literal["turns", "outcomes"]


class TopicConfig(Section):
    """A topic with the format of its records (a plain name means format ``casewatch``) and
    what it carries (``kind``; a plain name carries turns)."""

    name: str = Field(min_length=1, max_length=249)
    format: TopicFormat = "casewatch"
    kind: TopicKind = "turns"

    @model_validator(mode="after")
    def _outcomes_format(self) -> TopicConfig:
        if self.kind == "outcomes" and self.format not in ("casewatch", "mapped"):
            raise ValueError(
                f"topic {self.name!r}: an outcomes topic has format casewatch or mapped, "
                f"not {self.format}"
            )
        return self


class KafkaConfig(Section):
    """The Kafka cluster, the topics to read and the consumer group."""

    bootstrap_servers: list[str] = Field(
        default_factory=lambda: ["127.0.0.1:9092"], description="Brokers (host:port)."
    )
    topics: list[str | TopicConfig] = Field(
        default_factory=lambda: list[str | TopicConfig](["support.turns"]),
        min_length=1,
        description=(
            "Topics to read: a name (casewatch turn events) or {name, format, kind} with "
            "format casewatch, otlp_proto, otlp_json or mapped and kind turns or outcomes."
        ),
    )
    group_id: str = Field(default="casewatch", description="Every replica joins this group.")
    client_id: str = "casewatch"
    dlq_suffix: str = Field(default=".dlq", description="Dead-letter topic: the topic + this.")
    auto_offset_reset: Literal["earliest", "latest"] = Field(
        default="earliest", description="Where a group without committed offsets starts."
    )
    # Defaults for a loop that polls continuously and pauses partitions instead of blocking
    # (docs/kafka.md, "Consumer group timing"): a crashed member is replaced within ~10 s, live
    # members learn of a rebalance within 1 s, and a rebalance never waits more than 30 s for a
    # member.
    session_timeout_ms: int = Field(default=10_000, gt=0)
    heartbeat_interval_ms: int = Field(default=1_000, gt=0)
    max_poll_interval_ms: int = Field(default=30_000, gt=0)
    # Static membership (KIP-345): a stable name per replica, e.g. the pod name. A restarted
    # member with the same name takes its partitions back without a rebalance, and a clean stop
    # does not leave the group (a dynamic member does). Empty means dynamic membership.
    group_instance_id: str | None = Field(
        default=None,
        max_length=249,
        pattern=r"^[A-Za-z0-9._-]*$",
        description="Static group membership: a stable name per replica (the pod name).",
    )
    max_poll_records: int = Field(default=500, gt=0)
    # Kafka's default: a broker answers a fetch as soon as it has data and waits this long only
    # when it has none. Tansu 0.6 (the embedded broker) sleeps half of it (at most 250 ms)
    # after every fetch, data or not, which paces a consumer of its backlog (bench/README.md,
    # "ingest.py"): the demo and the benches lower it there.
    fetch_max_wait_ms: int = Field(
        default=500,
        ge=0,
        le=60_000,
        description="Longest the broker may hold a fetch when it has no data for it.",
    )
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: Path | None = Field(default=None, description="CA bundle for a private CA.")
    ssl_certfile: Path | None = Field(default=None, description="Client certificate (mTLS).")
    ssl_keyfile: Path | None = Field(default=None, description="Client key (mTLS).")
    max_message_bytes: int = Field(default=1024 * 1024, gt=0, description="Larger → dead letter.")
    # Workarounds for an embedded broker's departures from Kafka (docs/kafka.md, "Broker
    # quirks"): "auto" turns them on for Tansu, recognised by the cluster id it reports, and off
    # for any other broker; "none" makes casewatch a plain Kafka consumer whatever the broker.
    broker_quirks: Literal["auto", "tansu", "none"] = Field(
        default="auto",
        description="Embedded-broker workarounds: auto (on for Tansu only), tansu, or none.",
    )

    @property
    def topic_names(self) -> list[str]:
        return [t if isinstance(t, str) else t.name for t in self.topics]

    @property
    def topic_formats(self) -> dict[str, TopicFormat]:
        """Each turns topic's record format (outcomes topics: ``outcome_topics``)."""
        formats: dict[str, TopicFormat] = {}
        for topic in self.topics:
            if isinstance(topic, str):
                formats[topic] = "casewatch"
            elif topic.kind == "turns":
                formats[topic.name] = topic.format
        return formats

    @property
    def outcome_topics(self) -> dict[str, TopicFormat]:
        """The topics of kind ``outcomes``, with their format (casewatch or mapped)."""
        return {
            t.name: t.format for t in self.topics if not isinstance(t, str) and t.kind == "outcomes"
        }

    @property
    def join_timeout_ms(self) -> int:
        """How long a group join may take: the broker holds a JoinGroup up to the rebalance
        timeout (max.poll.interval.ms). A poll may block this long in a rebalance, which the
        liveness probe allows."""
        return max(30_000, self.max_poll_interval_ms + 5_000)

    @model_validator(mode="after")
    def _static_member_name(self) -> KafkaConfig:
        # An empty value (an unset environment variable in a chart) means dynamic membership.
        if self.group_instance_id == "":
            object.__setattr__(self, "group_instance_id", None)
        if self.group_instance_id in (".", ".."):
            raise ValueError("group_instance_id cannot be '.' or '..' (Kafka refuses them)")
        return self
