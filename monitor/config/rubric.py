"""The ``rubric`` section: rubric grading of live turns, the scheduled job ``rubric``
(``jobs/rubric.py``) and ``casewatch rubric``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from monitor.config.section import Section


class RubricConfig(Section):
    """Rubric grading of live turns (Pencils Down): the scheduled job ``rubric``."""

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
