"""The ``quality_estimate`` section: the severe rate corrected by human labels, the job
``jobs/quality_estimate.py``.
"""

from __future__ import annotations

from pydantic import Field

from monitor.config.section import Section


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
