"""The judges' sections: one judge (``judges.<name>``, the offline heuristic or an
OpenAI-compatible endpoint) and the panel of judges that scores a turn (``panel``). Read by
``monitor/judging``: a judge is built from its ``JudgeConfig``, the panel from its
``PanelConfig``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, SecretStr, model_validator

from monitor.config.secrets import Secret
from monitor.config.section import Section, read_key
from monitor.schema.turn import JudgeRole

# The offline judge: always configured, so the default of the settings' `judge` and the
# baseline's.
HEURISTIC = "heuristic"


class JudgeConfig(Section):
    """One judge: the offline heuristic, or any OpenAI-compatible chat-completions endpoint."""

    kind: Literal["openai", "heuristic"] = Field(
        default="openai",
        description="openai: an OpenAI-compatible endpoint; heuristic: the offline judge.",
    )
    base_url: str | None = Field(
        default=None, description="OpenAI-compatible base URL (…/v1); None means api.openai.com."
    )
    model: str = Field(default=HEURISTIC, description="The endpoint's model name.")
    api_key: SecretStr | None = None
    api_key_env: str | None = Field(
        default=None, description="Name of the env var holding the key."
    )
    api_key_file: Path | None = Field(default=None, description="File holding the key.")
    timeout_seconds: float = Field(default=60.0, gt=0, description="Per request attempt.")
    output_retries: int = Field(default=2, ge=0, le=10, description="Retries on invalid output.")
    transport_retries: int = Field(
        default=4, ge=0, le=20, description="Retries on 429/5xx/timeout."
    )
    backoff_initial_seconds: float = Field(default=0.5, ge=0)
    backoff_max_seconds: float = Field(default=30.0, ge=0)
    response_format: Literal["auto", "json_schema", "json_object"] = Field(
        default="auto",
        description="auto: json_schema, else JSON mode with the schema inline, else JSON mode "
        "(whichever the endpoint accepts first).",
    )
    max_output_tokens: int = Field(default=2000, gt=0)
    max_concurrent_requests: int | None = Field(
        default=None,
        gt=0,
        description="Requests in flight to this judge at most (None: one per calling thread). "
        "For a server that serves one at a time (llama.cpp): the rest wait here, not in its "
        "queue against timeout_seconds.",
    )
    price_input_per_mtok: float = Field(default=0.0, ge=0, description="USD per 1M input tokens.")
    price_output_per_mtok: float = Field(default=0.0, ge=0, description="USD per 1M output tokens.")

    _key: Secret = PrivateAttr(default=Secret())

    @model_validator(mode="after")
    def _check(self) -> JudgeConfig:
        if self.kind == "openai" and self.model == HEURISTIC:
            raise ValueError("an 'openai' judge needs 'model' (the endpoint's model name)")
        self._key = read_key("judge", self.api_key, self.api_key_env, self.api_key_file)
        return self

    def resolve_api_key(self) -> str | None:
        """The key from api_key, else the env var named by api_key_env, else api_key_file
        (read once, when the settings were built)."""
        return self._key.get()

    def fingerprint(self) -> dict[str, Any]:
        """What identifies this judge's behaviour (for idempotent storage). Never the key."""
        return self.model_dump(
            mode="json",
            include={"kind", "base_url", "model", "response_format", "max_output_tokens"},
        )


class PanelConfig(Section):
    """Which judges score a turn (the DAFE panel). One primary = single-judge mode."""

    primaries: list[str] = Field(
        default_factory=lambda: [HEURISTIC],
        min_length=1,
        max_length=2,
        description="One or two judges (names under judges) that score every sampled turn.",
    )
    arbiter: str | None = Field(
        default=None, description="The judge that scores a turn the two primaries disagree on."
    )
    disagreement: Literal["any_band", "critical_band", "s_final_delta"] = Field(
        default="any_band",
        description="When the primaries disagree: any metric's band, a critical metric's band,"
        " or |S_final difference| > s_final_threshold.",
    )
    s_final_threshold: float = Field(default=0.15, ge=0, le=1)

    def roles(self) -> list[tuple[str, JudgeRole]]:
        """Every judge of the panel with the role it scores in: the primaries ("single" when
        there is one), then the arbiter."""
        primary: JudgeRole = "primary" if len(self.primaries) == 2 else "single"
        roles: list[tuple[str, JudgeRole]] = [(name, primary) for name in self.primaries]
        if self.arbiter:
            roles.append((self.arbiter, "arbiter"))
        return roles

    @model_validator(mode="after")
    def _check(self) -> PanelConfig:
        # Same judge twice at temperature 0 always agrees: the panel would cost double for
        # nothing, and an arbiter that is also a primary always forms the median with itself.
        if len(set(self.primaries)) != len(self.primaries):
            raise ValueError("panel.primaries must name two different judges")
        if self.arbiter is not None:
            if len(self.primaries) != 2:
                raise ValueError("panel.arbiter needs two primaries to arbitrate between")
            if self.arbiter in self.primaries:
                raise ValueError("panel.arbiter must differ from the primaries")
        return self
