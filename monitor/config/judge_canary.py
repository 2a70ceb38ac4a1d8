"""The ``judge_canary`` section: a labelled reference set re-judged on a schedule by the live
judges, the job ``jobs/judge_canary.py``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from monitor.config.section import Section


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
        default=10,
        description="Fewer canary turns than this: refused at start (at least 2).",
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
        if self.min_turns < 2:
            # One turn is called severe or not: its severe calls cannot double (0 or 1 of 1),
            # so the canary could not tell a judge that changed from one that did not.
            raise ValueError(
                f"min_turns must be at least 2, got {self.min_turns}: a one-turn canary "
                "cannot detect a judge calling more turns severe"
            )
        if self.min_turns > self.max_turns:
            raise ValueError("min_turns must not exceed max_turns")
        return self
