"""The ``failure_modes`` section: the job ``jobs/failure_modes.py`` that groups each assistant's
failed turns (severe and moderate) of a window into recurring causes, and when a mode counts as
emerging; the failed cases (``cases``) grouped the same way, apart; and the optional embeddings
endpoint (``embeddings``) whose vectors replace the TF-IDF text features. The grouping itself is
``stats/failure_modes.py``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, PrivateAttr, SecretStr, model_validator

from monitor.config.secrets import Secret
from monitor.config.section import Section, read_key


class FailureModeWeights(Section):
    """Shares of the three parts of a failed turn in the likeness of two turns."""

    reasons: float = Field(default=0.6, ge=0, description="The judges' reasons.")
    query: float = Field(default=0.15, ge=0, description="The customer's query.")
    metrics: float = Field(default=0.25, ge=0, description="Which metrics failed.")

    @model_validator(mode="after")
    def _some(self) -> FailureModeWeights:
        if self.reasons + self.query + self.metrics <= 0:
            raise ValueError("at least one weight must be positive")
        return self


class EmbeddingsConfig(Section):
    """An OpenAI-compatible ``/v1/embeddings`` endpoint for the failure modes' text features.
    When it is down, errors or times out, a run falls back to the TF-IDF features (counted in
    casewatch_failure_mode_embedding_fallback_total{reason})."""

    base_url: str | None = Field(
        default=None, description="OpenAI-compatible base URL (…/v1); None means api.openai.com."
    )
    model: str = Field(description="The endpoint's embedding model name.")
    api_key: SecretStr | None = None
    api_key_env: str | None = Field(
        default=None, description="Name of the env var holding the key."
    )
    api_key_file: Path | None = Field(default=None, description="File holding the key.")
    timeout_seconds: float = Field(default=30.0, gt=0, description="Per request attempt.")
    max_retries: int = Field(
        default=2, ge=0, le=10, description="The openai client's retries on 429/5xx/timeout."
    )
    batch_size: int = Field(
        default=64, ge=1, le=2048, description="Texts sent in one request at most."
    )
    max_texts: int = Field(
        default=20_000,
        ge=1,
        description="Distinct texts embedded in one run at most; past it the run falls back "
        "to TF-IDF (reason over_cap).",
    )
    dimensions: int | None = Field(
        default=None, gt=0, description="Ask the endpoint for vectors this wide (if it can)."
    )

    _key: Secret = PrivateAttr(default=Secret())

    @model_validator(mode="after")
    def _read_key(self) -> EmbeddingsConfig:
        self._key = read_key("embeddings", self.api_key, self.api_key_env, self.api_key_file)
        return self

    def resolve_api_key(self) -> str | None:
        """The key from api_key, else the env var named by api_key_env, else api_key_file
        (read once, when the settings were built)."""
        return self._key.get()


class FailureModesConfig(Section):
    """Failed turns grouped into failure modes, per assistant, on the job lease."""

    enabled: bool = True
    interval_seconds: float = Field(default=900.0, gt=0, description="How often the job runs.")
    window_seconds: float = Field(
        default=7 * 86400.0, gt=0, description="The failed turns grouped: this far back."
    )
    recent_seconds: float = Field(
        default=86400.0,
        gt=0,
        description="The recent part of the window, where a mode is new or growing.",
    )
    min_turns: int = Field(
        default=30, ge=2, description="Fewer failed turns in the window: nothing is grouped."
    )
    min_mode_size: int = Field(default=5, ge=2, description="Smaller groups are not modes.")
    distance_threshold: float = Field(
        default=0.6,
        gt=0,
        lt=1,
        description="Cosine distance at which groups stop merging (lower: more, tighter modes).",
    )
    max_turns: int = Field(
        default=100_000,
        ge=100,
        description="The newest failed turns read per assistant; older ones are counted over_cap.",
    )
    sample_size: int = Field(
        default=2000,
        ge=100,
        le=10_000,
        description="Turns clustered directly; the others join the nearest mode.",
    )
    reason_chars: int = Field(
        default=400, ge=20, description="Each reason is cut to this many characters."
    )
    query_chars: int = Field(default=300, ge=0, description="The query is cut to this length.")
    weights: FailureModeWeights = Field(default_factory=FailureModeWeights)
    cases: bool = Field(
        default=True,
        description="Group the failed cases (severe or moderate case band) too, apart from turns.",
    )
    embeddings: EmbeddingsConfig | None = Field(
        default=None,
        description="An embeddings endpoint whose vectors replace the TF-IDF text features.",
    )
    match_threshold: float = Field(
        default=0.35,
        gt=0,
        le=1,
        description="Likeness of signatures at which a group keeps a known mode's id.",
    )
    growth_alpha: float = Field(
        default=0.01, gt=0, lt=1, description="Level of the test that a mode is growing."
    )
    min_growth: float = Field(
        default=2.0, ge=1, description="Recent share over earlier share for a growing mode."
    )

    @model_validator(mode="after")
    def _recent_inside(self) -> FailureModesConfig:
        if self.recent_seconds >= self.window_seconds:
            raise ValueError(
                f"recent_seconds ({self.recent_seconds:g}) must be shorter than "
                f"window_seconds ({self.window_seconds:g})"
            )
        return self
