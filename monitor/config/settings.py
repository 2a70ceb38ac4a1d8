"""Configuration: one frozen pydantic-settings object, built once at the entrypoint.

Sources, highest priority first: CLI-given values, environment (prefix ``CASEWATCH_``, nested
with ``__``, e.g. ``CASEWATCH_JUDGES__PRIMARY__MODEL``), the YAML file given with ``--config``,
then defaults. Components receive typed sub-objects, never the environment. Secrets are
``SecretStr`` and are read from the environment or from files, never from the command line.

The sections are modules of ``monitor/config/``, one per concept (``redaction``'s is
``monitor/redaction/config.py``, beside the redaction it configures), and components import
their section from there. This module holds only the root object, the checks that span
sections (a judge a section names is configured, a pinned baseline is a watched signal, the
weights and the mapping compile) and ``load_settings``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from monitor.config.baseline import BaselineConfig
from monitor.config.cases import CasesConfig
from monitor.config.daemon import DaemonConfig, ServerConfig
from monitor.config.detection import DetectionConfig
from monitor.config.drift import DriftConfig
from monitor.config.failure_modes import FailureModesConfig
from monitor.config.judge_canary import JudgeCanaryConfig
from monitor.config.judges import HEURISTIC, JudgeConfig, PanelConfig
from monitor.config.kafka import KafkaConfig, TopicConfig, TopicFormat
from monitor.config.messages import (
    CheckedYamlSource,
    env_value_errors,
    env_variable_for,
    mapping_expected,
    unknown_key,
)
from monitor.config.otel import AssemblyConfig, OtelExportConfig
from monitor.config.outcomes import OutcomesConfig
from monitor.config.quality_estimate import QualityEstimateConfig
from monitor.config.review import ReviewConfig
from monitor.config.rubric import RubricConfig
from monitor.config.sampling import SamplingConfig
from monitor.config.storage import StorageConfig
from monitor.errors import ConfigError, validation_error_lines
from monitor.redaction.config import RedactionConfig
from monitor.schema.mapping import TurnMapping
from monitor.schema.outcome import OutcomeMapping
from monitor.scoring.turn import BUILTIN_PROFILES, DEFAULT_CRITICAL_METRICS, validate_weights


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
    # Failed turns grouped into recurring causes (failure modes).
    failure_modes: FailureModesConfig = Field(default_factory=FailureModesConfig)
    quality_estimate: QualityEstimateConfig = Field(default_factory=QualityEstimateConfig)
    judge_canary: JudgeCanaryConfig = Field(default_factory=JudgeCanaryConfig)
    review: ReviewConfig = Field(default_factory=ReviewConfig)
    detection: DetectionConfig = Field(default_factory=DetectionConfig)
    # End-user feedback and case outcomes (topics of kind outcomes).
    outcomes: OutcomesConfig = Field(default_factory=OutcomesConfig)
    # Conversations judged as a whole when they go quiet.
    cases: CasesConfig = Field(default_factory=CasesConfig)
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
        from monitor.schema.turn import METRICS

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
        self._read_repartition_topics(formats)
        if "mapped" in formats.values() or self.mapping:
            TurnMapping.compile(self.mapping)  # MappingError (a ValueError) names the key
        if "mapped" in self.kafka.outcome_topics.values() or self.outcomes.mapping:
            OutcomeMapping.compile(self.outcomes.mapping)
        return self

    def _read_repartition_topics(self, formats: dict[str, TopicFormat]) -> None:
        # The group reads the repartition topics beside the topics they repartition: every
        # consumer of the settings (the source, the daemon's priming) sees them as topics.
        extra = [
            TopicConfig(name=internal, format="otlp_proto")
            for internal in self.assembly.repartition_topics(dict(formats)).values()
            if internal not in formats
        ]
        if extra:
            kafka = self.kafka.model_copy(update={"topics": [*self.kafka.topics, *extra]})
            object.__setattr__(self, "kafka", kafka)

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
            if assistant.endpoint is None:
                continue
            try:
                token = assistant.endpoint.resolve_api_key()
            except ConfigError:
                token = None
            if token:
                values.append(token)
        embeddings = self.failure_modes.embeddings
        if embeddings is not None:  # the failure modes' embeddings endpoint
            try:
                embeddings_key = embeddings.resolve_api_key()
            except ConfigError:
                embeddings_key = None
            if embeddings_key:
                values.append(embeddings_key)
        if self.kafka.sasl_password is not None:
            values.append(self.kafka.sasl_password.get_secret_value())
        try:  # the pseudonymization key
            redaction_key = self.redaction.resolve_key()
        except ConfigError:
            redaction_key = None
        if redaction_key:
            values.append(redaction_key.decode())
        return [v for v in values if v]


def _describe(exc: ValidationError, overrides: Mapping[str, Any]) -> str:
    prefix = Settings.model_config.get("env_prefix") or ""
    delimiter = Settings.model_config.get("env_nested_delimiter") or "__"
    lines = []
    for error, line in zip(exc.errors(), validation_error_lines(exc), strict=True):
        loc = tuple(error["loc"])
        where = ".".join(str(p) for p in loc)
        if error["type"] in ("model_type", "dict_type") and loc:
            # A list (or scalar) where a section belongs: say what to write.
            line = mapping_expected(where, error.get("input"))
        elif error["type"] == "extra_forbidden" and loc:
            line = unknown_key(Settings, loc)
        elif error["type"] == "value_error":
            # A check of ours (a ValueError naming its key): its own words, not pydantic's
            # "(root): Value error, ..." around them.
            said = str(error.get("ctx", {}).get("error", error["msg"]))
            line = f"{where}: {said}" if loc else said
        variable = None
        if loc and loc[0] not in overrides:
            variable = env_variable_for(loc, prefix, delimiter, os.environ)
        if variable is not None and line.startswith(f"{where}: "):
            # Said under the name the person typed, with the setting it feeds.
            line = f"{variable} (setting {where}): {line[len(where) + 2 :]}"
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
        raise ConfigError(_describe(exc, overrides)) from None
    except SettingsError as exc:
        prefix = Settings.model_config.get("env_prefix") or ""
        delimiter = Settings.model_config.get("env_nested_delimiter") or "__"
        bad = env_value_errors(Settings, prefix, delimiter)
        if bad:
            raise ConfigError("invalid environment value: " + "; ".join(bad)) from None
        raise ConfigError(f"invalid configuration: {exc}") from None
    except (ValueError, OSError) as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None
