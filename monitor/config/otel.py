"""The OpenTelemetry sections: how spans read from OTLP topics become traces (``assembly``)
and where verdicts go back out as ``gen_ai.evaluation.result`` log records
(``otel_export``). Read by the pipeline's assemble step and the daemon's evaluation sender.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, PrivateAttr, model_validator

from monitor.config.secrets import read_secret
from monitor.config.section import Section
from monitor.errors import ConfigError

MAX_TOPIC_NAME = 249

CaseField = Literal["subject", "description", "product", "environment"]


class AssemblyConfig(Section):
    """How spans from OTLP topics become traces, and which attributes hold the case fields."""

    idle_seconds: float = Field(
        default=30.0,
        gt=0,
        description=(
            "A trace is finished after this long without a span; one still without its root "
            "(or with a span whose parent never came) is counted trace_incomplete, not judged."
        ),
    )
    # Spans of one trace reach several partitions when the Collector does not key them by
    # trace id, and one consumer reads those partitions in its own order: the root may come
    # before its children. Two seconds is ten times the Collector batch processor's flush
    # interval (200 ms) and adds little to a turn that then waits seconds for its judges.
    settle_seconds: float = Field(
        default=2.0,
        ge=0,
        description=(
            "After the root span, a trace waits this long without a new span (stragglers "
            "from other partitions) before it is judged."
        ),
    )
    remember_finished_traces: int = Field(
        default=10_000,
        ge=0,
        description=(
            "Ids of finished traces remembered, so a span arriving after its trace was "
            "finished is counted late_span instead of starting a half-built trace."
        ),
    )
    # Off by default: keying the Collector's exporter by trace id (partition_traces_by_id)
    # gives whole traces at no cost, and one replica reading every partition needs neither.
    # On, every span is produced a second time, to a topic the operator creates.
    repartition: bool = Field(
        default=False,
        description=(
            "Re-publish the spans of each OTLP topic keyed by trace id to <topic> + "
            "repartition_suffix, read by the same group: every trace is assembled whole by one "
            "replica when the Collector does not key its messages by trace id."
        ),
    )
    repartition_suffix: str = Field(
        default=".casewatch-by-trace",
        min_length=1,
        max_length=100,
        pattern=r"^[A-Za-z0-9._-]+$",
        description="The repartition topic of an OTLP topic: its name + this (create it).",
    )
    max_open_traces: int = Field(
        default=10_000, gt=0, description="Open traces held; past it the oldest is finished."
    )
    max_open_spans: int = Field(
        default=200_000, gt=0, description="Spans held over all open traces (memory bound)."
    )
    max_spans_per_trace: int = Field(default=2_000, gt=0)
    case_attributes: dict[CaseField, list[str]] = Field(
        default_factory=dict,
        description=(
            "Span or resource attributes holding each case field, first present wins, "
            "e.g. {subject: [support.case.subject]}."
        ),
    )

    @model_validator(mode="after")
    def _settle_before_idle(self) -> AssemblyConfig:
        if self.settle_seconds >= self.idle_seconds:
            raise ValueError(
                f"settle_seconds ({self.settle_seconds}) must be less than idle_seconds "
                f"({self.idle_seconds}): a rooted trace would go idle before it settled"
            )
        return self

    def repartition_topics(self, formats: dict[str, str]) -> dict[str, str]:
        """Each OTLP topic of ``formats`` → its repartition topic (none when off)."""
        if not self.repartition:
            return {}
        topics = {
            t: f"{t}{self.repartition_suffix}"
            for t, f in formats.items()
            if f in ("otlp_proto", "otlp_json") and not t.endswith(self.repartition_suffix)
        }
        for internal in topics.values():
            if len(internal) > MAX_TOPIC_NAME:  # Kafka's limit; the producer would refuse it
                raise ValueError(
                    f"assembly.repartition_suffix: the repartition topic {internal[:40]}... is "
                    f"{len(internal)} characters, more than Kafka's {MAX_TOPIC_NAME}"
                )
        return topics


class OtelExportConfig(Section):
    """Verdicts written back as gen_ai.evaluation.result OTLP log records."""

    endpoint: str = Field(
        pattern=r"^https?://",
        description="OTLP/HTTP base URL, e.g. http://collector:4318 (records go to /v1/logs).",
    )
    headers_env: dict[str, str] = Field(
        default_factory=dict,
        description="Header name -> environment variable holding its value (e.g. a token).",
    )
    headers_file: Path | None = Field(
        default=None, description="File of `Name: value` lines, for headers kept in a secret."
    )
    timeout_seconds: float = Field(default=10.0, gt=0)
    max_queue_size: int = Field(default=2048, gt=0, description="Records queued; past it dropped.")
    max_batch_size: int = Field(default=512, gt=0)
    schedule_delay_ms: int = Field(default=1000, gt=0)

    _headers: tuple[dict[str, str], str | None] = PrivateAttr(default=({}, None))

    @model_validator(mode="after")
    def _read_headers(self) -> OtelExportConfig:
        # Read once, the one way casewatch reads secrets (monitor/config/secrets.py).
        headers: dict[str, str] = {}
        error = None
        for name, env in self.headers_env.items():
            secret = read_secret(
                "otel_export.", None, env, None, env_field=f"headers_env.{name}", file_field=""
            )
            if secret.error is not None:
                error = secret.error
            elif secret.value is not None:
                headers[name] = secret.value
        if self.headers_file is not None:
            secret = read_secret(
                "otel_export.",
                None,
                None,
                self.headers_file,
                env_field="",
                file_field="headers_file",
            )
            error = secret.error or error
            for line in (secret.value or "").splitlines():
                name, sep, value = line.partition(":")
                if line.strip() and not sep:
                    error = "otel_export.headers_file: a line is not `Name: value`"
                elif line.strip():
                    headers[name.strip()] = value.strip()
        self._headers = (headers, error)
        return self

    def resolve_headers(self) -> dict[str, str]:
        """The headers (read once, when the settings were built); ConfigError if unreadable."""
        headers, error = self._headers
        if error is not None:
            raise ConfigError(error)
        return dict(headers)
