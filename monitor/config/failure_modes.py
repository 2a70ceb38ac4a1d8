"""The ``failure_modes`` section: the job ``jobs/failure_modes.py`` that groups each assistant's
failed turns (severe and moderate) of a window into recurring causes, and when a mode counts as
emerging. The grouping itself is ``stats/failure_modes.py``.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from monitor.config.section import Section


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
