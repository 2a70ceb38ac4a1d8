"""Configuration: one frozen pydantic-settings object, built once at the entrypoint.

Sources, highest priority first: CLI-given values, environment (prefix ``CASEWATCH_``, nested
with ``__``, e.g. ``CASEWATCH_JUDGES__PRIMARY__MODEL``), the YAML file given with ``--config``,
then defaults. Components receive typed sub-objects, never the environment. Secrets are
``SecretStr`` and are read from the environment or from files, never from the command line.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from monitor.config.judges import HEURISTIC, JudgeConfig, PanelConfig
from monitor.config.kafka import KafkaConfig
from monitor.config.section import Section, read_key
from monitor.errors import ConfigError, validation_error_lines
from monitor.redaction.config import RedactionConfig
from monitor.scoring import BUILTIN_PROFILES, DEFAULT_CRITICAL_METRICS, validate_weights
from monitor.secrets import Secret, read_secret
from monitor.settings_errors import CheckedYamlSource, env_value_errors, mapping_expected
from monitor.turn_mapping import TurnMapping

CaseField = Literal["subject", "description", "product", "environment"]


class AssemblyConfig(Section):
    """How spans from OTLP topics become traces, and which attributes hold the case fields."""

    idle_seconds: float = Field(
        default=30.0,
        gt=0,
        description="A trace without its root span is complete after this long without a span.",
    )
    max_open_traces: int = Field(
        default=10_000, gt=0, description="Open traces held; past it the oldest is finished."
    )
    max_open_spans: int = Field(
        default=200_000, gt=0, description="Spans held over all open traces (memory bound)."
    )
    max_spans_per_trace: int = Field(default=2_000, gt=0)
    case_attributes: dict[
        Literal["subject", "description", "product", "environment"], list[str]
    ] = Field(
        default_factory=dict,
        description=(
            "Span or resource attributes holding each case field, first present wins, "
            "e.g. {subject: [support.case.subject]}."
        ),
    )


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
        # Read once, the one way casewatch reads secrets (monitor/secrets.py).
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


class AlwaysJudgeRule(Section):
    """Judge the turn regardless of the sampling rate when the rule matches."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,39}$", description="Bounded label value.")
    field: str = Field(description="'query', 'answer', 'feedback', or 'labels.<key>'.")
    pattern: str | None = Field(default=None, description="Regex searched in the field.")
    equals: str | None = Field(default=None, description="Exact value of the field.")


# Safe defaults for a monitor that may call a paid API: a tenth of the conversations
# and at most this many judge calls (and USD, once prices are configured) per hour. Raise them
# on purpose; the demo judges everything (monitor.demo.run).
DEFAULT_SAMPLING_RATE = 0.1
DEFAULT_BUDGET_CALLS_PER_HOUR = 1000.0
DEFAULT_BUDGET_USD_PER_HOUR = 5.0


class SamplingConfig(Section):
    """Which turns are judged: a share of conversations, rules, and hourly budgets."""

    default_rate: float = Field(
        default=DEFAULT_SAMPLING_RATE,
        ge=0,
        le=1,
        description="Share of conversations judged (chosen by a hash of conversation_id).",
    )
    rates: dict[str, float] = Field(default_factory=dict, description="Per assistant name.")
    always_judge: list[AlwaysJudgeRule] = Field(default_factory=list)
    # null: no budget (every sampled turn is judged, whatever it costs).
    budget_calls_per_hour: float | None = Field(default=DEFAULT_BUDGET_CALLS_PER_HOUR, gt=0)
    budget_usd_per_hour: float | None = Field(
        default=DEFAULT_BUDGET_USD_PER_HOUR,
        gt=0,
        description="USD per hour at most, from the judges' prices (null: no limit).",
    )
    estimated_usd_per_call: float = Field(
        default=0.0,
        ge=0,
        description="USD reserved per judge request until its actual cost is known.",
    )
    # Check every consumed turn's answer for near misses of evidence identifiers (no network);
    # a hit is judged (reason rule:identifier_tripwire) within the budget.
    identifier_tripwire: bool = True


class StorageConfig(Section):
    """The SQL store of turns, verdicts and judgments."""

    url: str = Field(
        default="sqlite:///casewatch.db",
        description="SQLAlchemy URL: sqlite:///FILE or postgresql+psycopg://user@host/db.",
    )
    retention_days: float | None = Field(
        default=30, gt=0, description="Rows older than this are purged (null: kept)."
    )
    retention_interval_seconds: float = Field(
        default=3600, gt=0, description="How often the retention job purges old rows."
    )


class ServerConfig(Section):
    """The HTTP server of /metrics, /healthz and /readyz."""

    host: str = "127.0.0.1"
    port: int = Field(default=9464, ge=0, le=65535)


class DaemonConfig(Section):
    """The processing loop: concurrency, backpressure, commits and stopping."""

    concurrency: int = Field(default=8, gt=0, le=1024, description="Judge calls in flight.")
    max_in_flight: int = Field(default=256, gt=0, description="Turns held before pausing.")
    screen_processes: int = Field(
        default=0,
        ge=0,
        le=32,
        description=(
            "Worker processes that recognise the turns not to be judged (valid, not sampled, "
            "tripwire clean) off the consumer's thread; 0 does it on that thread. 1 when "
            "ingest is the bottleneck and a core is free."
        ),
    )
    drain_timeout_seconds: float = Field(
        default=30.0, gt=0, description="On SIGTERM, how long in-flight turns may finish."
    )
    commit_interval_seconds: float = Field(
        default=1.0, gt=0, description="How often finished offsets are committed."
    )
    # On a rebalance, turns of revoked partitions still being judged are waited for this long
    # (capped by a quarter of kafka.max_poll_interval_ms) so the new owner does not pay for them
    # again; what is still running then is abandoned and counted.
    revoke_timeout_seconds: float = Field(default=10.0, ge=0)


class AssistantEndpointConfig(Section):
    """How the baseline-tier job asks an assistant a probe question over HTTP.

    ``openai``: POST {url}/chat/completions with the history and the query as chat messages
    (``model`` and an optional ``system_prompt``); the answer is the first choice's content.
    ``template``: POST ``body`` to ``url`` with placeholders replaced ("{{query}}",
    "{{history}}", "{{case.subject}}", "{{case.description}}", "{{case.product}}",
    "{{case.environment}}", "{{contexts}}", "{{probe_id}}"); the answer is read at
    ``answer_path``, e.g. "$.data.answer" or "$.choices[0].message.content".
    """

    kind: Literal["openai", "template"] = "openai"
    url: str = Field(description="Base URL (…/v1) for openai; the full URL for template.")
    model: str | None = None
    system_prompt: str | None = None
    body: dict[str, Any] | None = None
    answer_path: str = "$.answer"
    headers: dict[str, str] = Field(default_factory=dict)
    api_key_env: str | None = Field(default=None, description="Env var with a bearer token.")
    api_key_file: Path | None = None
    timeout_seconds: float = Field(default=60.0, gt=0)
    _key: Secret = PrivateAttr(default=Secret())

    @model_validator(mode="after")
    def _check(self) -> AssistantEndpointConfig:
        if self.kind == "openai" and not self.model:
            raise ValueError("an 'openai' assistant endpoint needs 'model'")
        if self.kind == "template" and self.body is None:
            raise ValueError("a 'template' assistant endpoint needs 'body'")
        self._key = read_key("assistant", None, self.api_key_env, self.api_key_file)
        return self

    def resolve_api_key(self) -> str | None:
        """The bearer token from api_key_env or api_key_file (read once, when the settings
        were built)."""
        return self._key.get()


class BaselineAssistantConfig(Section):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", description="Label value.")
    endpoint: AssistantEndpointConfig | None = None
    from_turns: bool = Field(
        default=False, description="Also judge recent stored turns whose query matches a probe."
    )
    turns_max_age_hours: float = Field(default=24.0, gt=0)

    @model_validator(mode="after")
    def _check(self) -> BaselineAssistantConfig:
        if self.endpoint is None and not self.from_turns:
            raise ValueError(f"assistant {self.name!r} needs an endpoint or from_turns: true")
        return self


class BaselineConfig(Section):
    """Scheduled pairwise checks against High/Medium/Low baseline answers (seed 000)."""

    enabled: bool = False
    probes: Path | None = Field(default=None, description="Probe set (JSON Lines).")
    judge: str = Field(default=HEURISTIC, description="A configured judge (pairwise mode).")
    assistants: list[BaselineAssistantConfig] = Field(default_factory=list)
    interval_seconds: float = Field(default=3600, gt=0)
    swap: bool = Field(default=True, description="Judge both orders and average.")
    confidence_threshold: float = Field(default=0.1, ge=0, le=1)
    top_logprobs: int = Field(default=5, ge=1, le=20)
    concurrency: int = Field(default=4, ge=1, le=64)

    @model_validator(mode="after")
    def _check(self) -> BaselineConfig:
        if self.enabled and (self.probes is None or not self.assistants):
            raise ValueError("baseline.enabled needs 'probes' and at least one assistant")
        names = [a.name for a in self.assistants]
        if len(set(names)) != len(names):
            raise ValueError("baseline.assistants names must be unique")
        return self


class RubricConfig(Section):
    """Rubric grading of live turns (seed 001): the scheduled job ``rubric``."""

    enabled: bool = False
    rubric_file: Path | None = Field(default=None, description="Rubric set (YAML or JSONL).")
    judge: str | None = Field(
        default=None, description="An 'openai' judge under `judges` (default: `judge`)."
    )
    label: str = Field(default="rubric_id", description="Turn label naming a rubric entry id.")
    match_case_subject: bool = Field(
        default=True, description="Also match an entry whose query equals the case subject."
    )
    match_query: bool = Field(
        default=False, description="Also match an entry whose query equals the turn's query."
    )
    concurrency: int = Field(default=4, gt=0, le=64, description="Grading requests in flight.")
    interval_seconds: float = Field(default=300, gt=0)
    lookback_hours: float = Field(default=24, gt=0, description="Stored turns considered.")
    max_turns_per_run: int = Field(default=20, gt=0)
    covered_grade: int = Field(default=4, ge=0, le=5, description="Grade counted as covered.")
    max_passage_tokens: int = Field(default=400, gt=0)

    @model_validator(mode="after")
    def _check(self) -> RubricConfig:
        if self.enabled and self.rubric_file is None:
            raise ValueError("rubric.enabled needs rubric.rubric_file")
        return self


class DriftReferencePeriod(Section):
    """A pinned reference window (e.g. the week after a known-good release)."""

    start: datetime
    end: datetime

    @model_validator(mode="after")
    def _check(self) -> DriftReferencePeriod:
        start, end = _as_utc(self.start), _as_utc(self.end)
        if end <= start:
            raise ValueError(f"end ({end.isoformat()}) must be after start ({start.isoformat()})")
        return self

    def bounds(self) -> tuple[datetime, datetime]:
        """(start, end) as aware UTC datetimes (naive values are taken as UTC)."""
        return _as_utc(self.start), _as_utc(self.end)


class DriftMinEffect(Section):
    """Smallest effect size that counts as drift, per kind of statistic (a significant but
    smaller shift is reported, not flagged: a huge window makes any shift significant)."""

    ks_d: float = Field(default=0.1, ge=0, le=1, description="Two-sample KS D (continuous).")
    cliffs_delta: float = Field(
        default=0.147, ge=0, le=1, description="|Cliff's delta| (counts; 0.147 = 'small')."
    )
    cramers_v: float = Field(default=0.1, ge=0, le=1, description="Cramér's V (shares).")
    cohens_h: float = Field(default=0.1, ge=0, le=3.15, description="|Cohen's h| (rates).")
    psi: float = Field(default=0.1, ge=0, description="Population stability index.")


_LABEL_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")


def drift_label_signal(key: str) -> str:
    """The bounded signal name of a configured label key (``input_label_<key>``)."""
    return "input_label_" + re.sub(r"[^a-z0-9_]", "_", key.lower())


class DriftConfig(Section):
    """Recent window vs reference window, per assistant, read from the SQL store."""

    enabled: bool = True
    interval_seconds: float = Field(default=300.0, gt=0, description="How often the job runs.")
    recent_window_seconds: float = Field(default=3600.0, gt=0)
    reference_window_seconds: float = Field(
        default=7 * 86400.0, gt=0, description="Length of the window just before the recent one."
    )
    reference_period: DriftReferencePeriod | None = Field(
        default=None, description="Pinned reference [start, end) instead of the sliding one."
    )
    min_turns: int = Field(default=30, ge=2, description="Per window and signal, else skipped.")
    alpha: float = Field(default=0.01, gt=0, lt=1, description="Benjamini-Hochberg FDR level.")
    min_effect: DriftMinEffect = Field(default_factory=DriftMinEffect)
    labels: list[str] = Field(
        default_factory=list, max_length=10, description="Event label keys to test."
    )
    max_categories: int = Field(
        default=20, ge=2, le=200, description="Rarer categories are pooled as __other__."
    )

    @model_validator(mode="after")
    def _check(self) -> DriftConfig:
        signals: dict[str, str] = {}
        for key in self.labels:
            if not _LABEL_KEY.match(key):
                raise ValueError(
                    f"labels: {key!r} is not a label key (1-40 letters, digits, '_', '.', '-')"
                )
            signal = drift_label_signal(key)
            if signal in signals:
                raise ValueError(
                    f"labels: {signals[signal]!r} and {key!r} map to the same signal {signal}"
                )
            signals[signal] = key
        return self


# --- detection: sequential detection of quality regressions ---
# The false-alarm budget's bounds: below a quarter hour the detectors would page on noise; past
# ten years the thresholds only grow (and the calibration's chain with them) for no gain.
MIN_FALSE_ALARM_DAYS = 0.01
MAX_FALSE_ALARM_DAYS = 3650.0
MAX_SHIFT = 20.0  # a larger multiple is detected by the largest CUSUM of the grid anyway


class DetectionConfig(Section):
    """Bernoulli CUSUMs per assistant and signal, run by a short-interval job on the lease."""

    enabled: bool = True
    interval_seconds: float = Field(default=15.0, gt=0, description="How often the job runs.")
    false_alarm_days: float = Field(
        default=30.0,
        ge=MIN_FALSE_ALARM_DAYS,
        le=MAX_FALSE_ALARM_DAYS,
        description="At most one false alarm per this many days for the whole deployment.",
    )
    shifts: list[float] = Field(
        default_factory=lambda: [1.5, 2.0, 3.0, 5.0],
        min_length=1,
        max_length=8,
        description="Regressions watched for, as multiples of the baseline rate (distinct, "
        f"each > 1 and <= {MAX_SHIFT:g}).",
    )
    reference_window_seconds: float = Field(
        default=7 * 86400.0, gt=0, description="The baseline rate's window, ending the gap ago."
    )
    reference_gap_seconds: float = Field(
        default=3600.0, ge=0, description="Between the reference window's end and now."
    )
    baseline_refresh_seconds: float = Field(
        default=600.0,
        gt=0,
        description="How often every assistant's reference baseline is read again; detectors "
        "not armed yet are rechecked on every run, and pinned baselines need no reference.",
    )
    min_reference_turns: int = Field(
        default=500,
        ge=10,
        description="Fewer judged turns in the reference window: not armed (unless pinned).",
    )
    overlap_seconds: float = Field(
        default=120.0,
        gt=0,
        description="Re-read window of the cursor: longer than any write transaction plus the "
        "replicas' clock skew.",
    )
    baselines: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="Pinned baseline rates, armed at once: {assistant: {signal: rate}} (signal: "
        "turn_severe or <critical metric>_severe).",
    )

    @model_validator(mode="after")
    def _check(self) -> DetectionConfig:
        if len(set(self.shifts)) != len(self.shifts) or any(
            not 1.0 < c <= MAX_SHIFT for c in self.shifts
        ):
            raise ValueError(
                f"shifts must be distinct multiples > 1 and <= {MAX_SHIFT:g}, got {self.shifts}"
            )
        for assistant, rates in self.baselines.items():
            for signal, rate in rates.items():
                if not 0.0 < rate < 1.0:
                    raise ValueError(f"baselines.{assistant}.{signal}: {rate} is not in (0, 1)")
        return self


# --- end detection ---


def _as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class QualityEstimateConfig(Section):
    """The severe rate corrected by the newest labelling batch of each assistant."""

    enabled: bool = True
    interval_seconds: float = Field(default=900.0, gt=0, description="How often the job runs.")
    confidence: float = Field(default=0.95, gt=0, lt=1, description="Interval coverage.")
    anytime_tightest_at: int = Field(
        default=10,
        ge=1,
        description="Labelled batch at which the anytime-valid interval is tightest (its width "
        "only; the coverage holds at every look whatever it is).",
    )


class JudgeCanaryConfig(Section):
    """A reference set of labelled turns re-judged on a schedule by the live judges."""

    enabled: bool = True
    file: Path | None = Field(
        default=None,
        description="Canary set (JSONL: {turn, labels}); none: the newest labelled turns "
        "in the store.",
    )
    interval_seconds: float = Field(default=3600.0, gt=0, description="How often it runs.")
    max_turns: int = Field(
        default=24,
        ge=1,
        le=1000,
        description="Canary turns judged per run and judge (calls per hour = max_turns x "
        "judges x 3600 / interval_seconds), charged to the hourly judge budget.",
    )
    min_turns: int = Field(
        default=10, ge=1, description="Fewer canary turns than this: refused at start."
    )
    baseline_runs: int = Field(
        default=3,
        ge=1,
        description="First successful runs of a judge configuration that set its baseline.",
    )
    false_alarm_days: float = Field(
        default=30.0, gt=0, description="At most one false alarm per this many days."
    )
    shifts: list[float] = Field(
        default_factory=lambda: [1.5, 2.0, 3.0],
        min_length=1,
        max_length=8,
        description="Rises in the judge's severe calls watched for, as multiples.",
    )

    @model_validator(mode="after")
    def _check(self) -> JudgeCanaryConfig:
        if any(c <= 1.0 for c in self.shifts) or len(set(self.shifts)) != len(self.shifts):
            raise ValueError(f"shifts must be distinct multiples > 1, got {self.shifts}")
        if self.min_turns > self.max_turns:
            raise ValueError("min_turns must not exceed max_turns")
        return self


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="CASEWATCH_",
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    judges: dict[str, JudgeConfig] = Field(default_factory=dict)
    judge: str = Field(default=HEURISTIC, description="Judge used in single-judge mode.")
    panel: PanelConfig | None = None
    weight_profile: str = Field(
        default="default",
        description="Weights of S_final: default, uniform, retrieval-heavy or weight_profiles.",
    )
    weight_profiles: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="Your own profiles: name -> {metric: weight}."
    )
    critical_metrics: list[str] = Field(
        default_factory=lambda: list(DEFAULT_CRITICAL_METRICS),
        description="A turn is at least as bad as the worst band among these metrics.",
    )
    kafka: KafkaConfig = Field(default_factory=KafkaConfig)
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    daemon: DaemonConfig = Field(default_factory=DaemonConfig)
    baseline: BaselineConfig = Field(default_factory=BaselineConfig)
    rubric: RubricConfig = Field(default_factory=RubricConfig)
    drift: DriftConfig = Field(default_factory=DriftConfig)
    quality_estimate: QualityEstimateConfig = Field(default_factory=QualityEstimateConfig)
    judge_canary: JudgeCanaryConfig = Field(default_factory=JudgeCanaryConfig)
    detection: DetectionConfig = Field(default_factory=DetectionConfig)
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="JSON logs on stderr from this level up."
    )
    redact: list[SecretStr] = Field(default_factory=list, description="Extra strings to redact.")
    # Personal data in turns: pseudonymized after decode.
    redaction: RedactionConfig = Field(default_factory=RedactionConfig)
    # OpenTelemetry intake: spans of otlp_proto / otlp_json topics become turns.
    assembly: AssemblyConfig = Field(default_factory=AssemblyConfig)
    # `format: mapped` topics: one JMESPath expression per turn-event field.
    mapping: dict[str, str] = Field(
        default_factory=dict,
        description="Turn-event field (dotted: assistant.name) -> JMESPath expression.",
    )
    otel_export: OtelExportConfig | None = None

    @model_validator(mode="after")
    def _check(self) -> Settings:
        for name, weights in self.weight_profiles.items():
            try:
                validate_weights(weights)
            except ValueError as exc:
                raise ValueError(f"weight_profiles.{name}: {exc}") from exc
        if self.weight_profile not in self.all_profiles():
            raise ValueError(
                f"weight_profile {self.weight_profile!r} is not defined; "
                f"known: {', '.join(sorted(self.all_profiles()))}"
            )
        from monitor.models import METRICS

        bad = [m for m in self.critical_metrics if m not in METRICS]
        if bad:
            raise ValueError(f"critical_metrics: unknown metric(s) {', '.join(bad)}")
        # A pinned baseline for a signal no detector watches would be silently ignored.
        watched = {"turn_severe", *(f"{m}_severe" for m in self.critical_metrics)}
        for assistant, rates in self.detection.baselines.items():
            for signal in rates:
                if signal not in watched:
                    raise ValueError(
                        f"detection.baselines.{assistant}.{signal}: not a watched signal; "
                        f"watched: {', '.join(sorted(watched))}"
                    )
        names = self.judge_names()
        if self.judge not in names:
            raise ValueError(f"judge {self.judge!r} is not configured; known: {', '.join(names)}")
        if self.panel is not None:
            for n in [*self.panel.primaries, *([self.panel.arbiter] if self.panel.arbiter else [])]:
                if n not in names:
                    raise ValueError(f"panel: judge {n!r} is not configured")
        if self.baseline.enabled and self.baseline.judge not in names:
            raise ValueError(f"baseline: judge {self.baseline.judge!r} is not configured")
        formats = self.kafka.topic_formats
        if "mapped" in formats.values() or self.mapping:
            TurnMapping.compile(self.mapping)  # MappingError (a ValueError) names the key
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if settings_cls.model_config.get("yaml_file"):
            sources.append(CheckedYamlSource(settings_cls))
        sources.append(file_secret_settings)
        return tuple(sources)

    # ------------------------------------------------------------------ derived views

    def all_profiles(self) -> dict[str, dict[str, float]]:
        return {**BUILTIN_PROFILES, **self.weight_profiles}

    def weights(self) -> dict[str, float]:
        return validate_weights(self.all_profiles()[self.weight_profile])

    def judge_names(self) -> list[str]:
        return sorted({HEURISTIC, *self.judges})

    def judge_config(self, name: str) -> JudgeConfig:
        if name in self.judges:
            return self.judges[name]
        if name == HEURISTIC:
            return JudgeConfig(kind="heuristic")
        raise ConfigError(
            f"judge {name!r} is not configured; known: {', '.join(self.judge_names())}"
        )

    def effective_panel(self) -> PanelConfig:
        return self.panel or PanelConfig(primaries=[self.judge])

    def secret_values(self) -> list[str]:
        """Every secret this configuration can reach, for log redaction."""
        values = [s.get_secret_value() for s in self.redact]
        for cfg in self.judges.values():
            try:
                key = cfg.resolve_api_key()
            except ConfigError:
                key = None
            if key:
                values.append(key)
        for assistant in self.baseline.assistants:  # assistant tokens too
            endpoint = assistant.endpoint
            token = endpoint._key.value if endpoint is not None else None
            if token:
                values.append(token)
        if self.kafka.sasl_password is not None:
            values.append(self.kafka.sasl_password.get_secret_value())
        try:  # the pseudonymization key
            redaction_key = self.redaction.resolve_key()
        except ConfigError:
            redaction_key = None
        if redaction_key:
            values.append(redaction_key.decode())
        return [v for v in values if v]


def _describe(exc: ValidationError) -> str:
    lines = []
    for error, line in zip(exc.errors(), validation_error_lines(exc), strict=True):
        if error["type"] in ("model_type", "dict_type") and error["loc"]:
            # A list (or scalar) where a section belongs: say what to write.
            line = mapping_expected(".".join(str(p) for p in error["loc"]), error.get("input"))
        lines.append(f"  {line}")
    return "invalid configuration:\n" + "\n".join(lines)


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build the settings from overrides, environment and an optional YAML file.

    Raises ConfigError with one line per bad field (dotted path + reason).
    """
    if config_file is not None and not config_file.is_file():
        raise ConfigError(f"config file {config_file} does not exist or is not a file")
    cls: type[Settings] = Settings
    if config_file is not None:
        # A subclass carries the file path; the priority order stays the one declared above.
        cls = type(
            "FileSettings",
            (Settings,),
            {
                "model_config": SettingsConfigDict(
                    **{**Settings.model_config, "yaml_file": config_file}
                )
            },
        )
    try:
        return cls(**overrides)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None
    except SettingsError as exc:
        prefix = Settings.model_config.get("env_prefix") or ""
        delimiter = Settings.model_config.get("env_nested_delimiter") or "__"
        bad = env_value_errors(Settings, prefix, delimiter)
        if bad:
            raise ConfigError("invalid environment value: " + "; ".join(bad)) from None
        raise ConfigError(f"invalid configuration: {exc}") from None
    except (ValueError, OSError) as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None
