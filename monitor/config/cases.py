"""The ``cases`` section: conversations judged as a whole when they go quiet, the job
``jobs/cases.py``.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from monitor.config.section import Section


class CasesConfig(Section):
    """Each sampled conversation judged as a whole (a case) once it has gone quiet."""

    enabled: bool = True
    interval_seconds: float = Field(
        default=60.0, gt=0, description="How often the job looks for cases to close."
    )
    # Peers close a conversation after 5 minutes of quiet (Opik's default thread timeout,
    # Phoenix's 300 s session delay). A support customer is often away running the step the
    # assistant gave (a restart, a reinstall) before replying, and every resume after a close
    # costs another case call, so casewatch waits twice that: a case signal ten minutes late
    # is still well inside the hour the detectors and alerts look at.
    idle_seconds: float = Field(
        default=600.0,
        gt=0,
        description="A case closes when its newest stored turn is this old (or at once when a "
        "turn has ends_case: true); a turn stored after that resumes it.",
    )
    lookback_seconds: float = Field(
        default=86400.0,
        gt=0,
        description="Only conversations with a turn stored this recently are looked at: older "
        "ones were closed and judged before (or are outside the window after an upgrade).",
    )
    max_cases_per_run: int = Field(
        default=200, ge=1, le=100_000, description="Cases judged per run at most (oldest first)."
    )
    max_failures: int = Field(
        default=3,
        ge=1,
        le=20,
        description="A case whose judge failed is retried at the next run, this many "
        "judge_failed verdicts in a row at most (then only a new turn retries it).",
    )
    max_prompt_chars: int = Field(
        default=60_000,
        ge=2_000,
        description="The case data in one judge prompt at most (about 4 characters a token): "
        "longer cases lose their oldest turns, said in the prompt and in the verdict.",
    )

    @model_validator(mode="after")
    def _check(self) -> CasesConfig:
        if self.lookback_seconds <= self.idle_seconds:
            raise ValueError(
                f"lookback_seconds ({self.lookback_seconds}) must exceed idle_seconds "
                f"({self.idle_seconds}): a case must still be in the window when it closes"
            )
        return self
