"""The ``detection`` section: sequential detection of quality regressions (Bernoulli CUSUMs
per assistant and signal), the job ``jobs/detection.py`` and ``casewatch detect``.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from monitor.config.section import Section

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
        description="Unused: the detectors mark each verdict they observe, whenever it "
        "commits, so no re-read window is needed (still accepted, so settings that set it load).",
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
