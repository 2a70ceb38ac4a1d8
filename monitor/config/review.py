"""The ``review`` section: the review queue on a Label Studio server, the job
``jobs/review_queue.py`` (docs/review-queue.md).

The token is read from the environment or a file only, never written inline in the YAML: the
file is often committed, and a Label Studio token acts as the person it belongs to.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, PrivateAttr, model_validator

from monitor.config.secrets import Secret, read_secret
from monitor.config.section import Section
from monitor.errors import ConfigError


class ReviewConfig(Section):
    """Turns sent to people on a Label Studio server, and their labels brought back."""

    enabled: bool = False
    url: str = Field(
        default="http://127.0.0.1:8080",
        description="The Label Studio server (its base URL, without /api).",
    )
    token_env: str | None = Field(
        default=None, description="Environment variable holding the Label Studio access token."
    )
    token_file: Path | None = Field(
        default=None, description="File holding the Label Studio access token."
    )
    project_title: str = Field(
        default="casewatch review",
        min_length=3,  # Label Studio's own bounds on a project title
        max_length=50,
        description="The Label Studio project casewatch creates (found again by this title).",
    )
    interval_seconds: float = Field(default=900.0, gt=0, description="How often the job runs.")
    timeout_seconds: float = Field(
        default=10.0, gt=0, le=300, description="Each request to the server at most."
    )
    severe_per_run: int = Field(
        default=20,
        ge=0,
        le=1000,
        description="Turns the judge called severe queued per run (newest first; 0: none).",
    )
    disagreements_per_run: int = Field(
        default=20,
        ge=0,
        le=1000,
        description="Turns whose user feedback disputes the judge's band (unhappy with a turn it "
        "passed, happy with one it failed) queued per run (newest first; 0: none).",
    )
    uncertain_per_run: int = Field(
        default=20,
        ge=0,
        le=1000,
        description="Expected number of turns drawn per assistant and run by uncertainty, each "
        "with its inclusion probability (0: none).",
    )
    uncertain_window_hours: float = Field(
        default=24.0,
        gt=0,
        description="The frame of the first uncertainty draw of an assistant; later draws take "
        "the turns since the previous draw's frame ended.",
    )
    push_per_run: int = Field(
        default=200,
        ge=1,
        le=10_000,
        description="Tasks pushed per run at most; the rest wait in the backlog for the next run.",
    )

    _token: Secret = PrivateAttr(default=Secret())

    @model_validator(mode="after")
    def _check(self) -> ReviewConfig:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https://, got {self.url!r}")
        self._token = read_secret(
            "review.", None, self.token_env, self.token_file,
            env_field="token_env", file_field="token_file",
        )  # fmt: skip
        if self.enabled and self._token.error is None and self._token.value is None:
            raise ValueError("review is enabled but has no token: set token_env or token_file")
        return self

    def token(self) -> str:
        """The access token (read once, when the settings were built); ConfigError naming the
        field when it could not be read."""
        value = self._token.get()
        if value is None:
            raise ConfigError("review: no token configured (set token_env or token_file)")
        return value
