"""The ``baseline`` section: scheduled pairwise checks of assistants against baseline
answers, and how a probe question reaches an assistant over HTTP. Read by
``jobs/baseline_tiers.py`` and ``jobs/assistant_client.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, model_validator

from monitor.config.judges import HEURISTIC
from monitor.config.secrets import Secret
from monitor.config.section import Section, read_key


class AssistantEndpointConfig(Section):
    """How the baseline-tier job asks an assistant a probe question over HTTP.

    ``openai``: POST {url}/chat/completions with the history and the query as chat messages
    (``model`` and an optional ``system_prompt``); the answer is the first choice's content.
    ``template``: POST ``body`` to ``url`` with placeholders replaced ("{{query}}",
    "{{history}}", "{{case.subject}}", "{{case.description}}", "{{case.product}}",
    "{{case.environment}}", "{{contexts}}", "{{probe_id}}"); the answer is read at
    ``answer_path``, e.g. "$.data.answer" or "$.choices[0].message.content".
    """

    kind: Literal["openai", "template"] = "openai"
    url: str = Field(description="Base URL (…/v1) for openai; the full URL for template.")
    model: str | None = None
    system_prompt: str | None = None
    body: dict[str, Any] | None = None
    answer_path: str = "$.answer"
    headers: dict[str, str] = Field(default_factory=dict)
    api_key_env: str | None = Field(default=None, description="Env var with a bearer token.")
    api_key_file: Path | None = None
    timeout_seconds: float = Field(default=60.0, gt=0)
    _key: Secret = PrivateAttr(default=Secret())

    @model_validator(mode="after")
    def _check(self) -> AssistantEndpointConfig:
        if self.kind == "openai" and not self.model:
            raise ValueError("an 'openai' assistant endpoint needs 'model'")
        if self.kind == "template" and self.body is None:
            raise ValueError("a 'template' assistant endpoint needs 'body'")
        self._key = read_key("assistant", None, self.api_key_env, self.api_key_file)
        return self

    def resolve_api_key(self) -> str | None:
        """The bearer token from api_key_env or api_key_file (read once, when the settings
        were built)."""
        return self._key.get()


class BaselineAssistantConfig(Section):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", description="Label value.")
    endpoint: AssistantEndpointConfig | None = None
    from_turns: bool = Field(
        default=False, description="Also judge recent stored turns whose query matches a probe."
    )
    turns_max_age_hours: float = Field(default=24.0, gt=0)

    @model_validator(mode="after")
    def _check(self) -> BaselineAssistantConfig:
        if self.endpoint is None and not self.from_turns:
            raise ValueError(f"assistant {self.name!r} needs an endpoint or from_turns: true")
        return self


class BaselineConfig(Section):
    """Scheduled pairwise checks against High/Medium/Low baseline answers (DICE)."""

    enabled: bool = False
    probes: Path | None = Field(default=None, description="Probe set (JSON Lines).")
    judge: str = Field(default=HEURISTIC, description="A configured judge (pairwise mode).")
    assistants: list[BaselineAssistantConfig] = Field(default_factory=list)
    interval_seconds: float = Field(default=3600, gt=0)
    swap: bool = Field(default=True, description="Judge both orders and average.")
    confidence_threshold: float = Field(default=0.1, ge=0, le=1)
    top_logprobs: int = Field(default=5, ge=1, le=20)
    concurrency: int = Field(default=4, ge=1, le=64)

    @model_validator(mode="after")
    def _check(self) -> BaselineConfig:
        if self.enabled and (self.probes is None or not self.assistants):
            raise ValueError("baseline.enabled needs 'probes' and at least one assistant")
        names = [a.name for a in self.assistants]
        if len(set(names)) != len(names):
            raise ValueError("baseline.assistants names must be unique")
        return self
