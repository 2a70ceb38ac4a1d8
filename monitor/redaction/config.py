"""The ``redaction`` section of the settings, and the policy it builds.

Kept here rather than in ``monitor.config.settings`` so the section, its checks and the detectors it
configures change together; ``Settings`` holds it as ``redaction``.

Modes per destination: ``before_judging`` (what sampling rules, the tripwire and the judges
read), ``stored_turns`` (what the ``turns`` table keeps) and ``dead_letter`` (what a poison
record carries to the dead-letter topic). The redacted text is what flows on after decode, so a
turn judged redacted is stored redacted: ``stored_turns: false`` only takes effect with
``before_judging: false`` (refused otherwise, rather than silently ignored).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import phonenumbers
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    model_validator,
)

from monitor.config.secrets import Secret, read_secret
from monitor.errors import ConfigError
from monitor.redaction.policy import BUILTIN_KINDS, DEFAULT_MAX_CHARS, RedactionPolicy

__all__ = ["RedactionConfig"]

_MIN_KEY_BYTES = 16


def _compiles(pattern: str) -> str:
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"the pattern does not compile: {exc}") from None
    if compiled.fullmatch(""):
        raise ValueError("the pattern matches the empty string")
    return pattern


PatternText = Annotated[str, AfterValidator(_compiles)]


class RedactionConfig(BaseModel):
    """Pseudonymize personal data and secrets right after decode."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(default=True, description="Off: no redaction anywhere.")
    before_judging: bool = Field(
        default=True, description="Sampling rules, tripwire and judges see redacted text."
    )
    stored_turns: bool = Field(default=True, description="The turns table keeps redacted text.")
    dead_letter: bool = Field(default=True, description="Poison records are redacted too.")
    emails: bool = True
    phones: bool = True
    cards: bool = True
    ibans: bool = True
    secrets: bool = True
    ips: bool = Field(default=False, description="The tripwire compares IPs: off by default.")
    hostnames: bool = Field(default=False, description="Likewise hostnames: off by default.")
    phone_region: str = Field(
        default="US", description="Region of numbers written without a country code."
    )
    patterns: dict[Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")], PatternText] = Field(
        default_factory=dict, description="Operator kinds: name -> regex (Python syntax)."
    )
    key: SecretStr | None = Field(
        default=None, description="Keyed placeholders, stable across turns (env or file only)."
    )
    key_env: str | None = Field(default=None, description="Env var holding the key.")
    key_file: Path | None = Field(default=None, description="File holding the key.")
    max_chars: int = Field(
        default=DEFAULT_MAX_CHARS, gt=0, description="Larger turns are skipped, never passed on."
    )

    _key: Secret = PrivateAttr(default=Secret())

    @model_validator(mode="after")
    def _check(self) -> RedactionConfig:
        if self.phone_region not in phonenumbers.SUPPORTED_REGIONS:
            raise ValueError(
                f"redaction.phone_region: {self.phone_region!r} is not a region libphonenumber"
                " knows (ISO 3166 alpha-2 in capitals, e.g. US, GB, DE)"
            )
        clash = sorted(set(self.patterns) & set(BUILTIN_KINDS))
        if clash:
            raise ValueError(f"redaction.patterns: {', '.join(clash)} name built-in kinds")
        if self.enabled and self.before_judging and not self.stored_turns:
            raise ValueError(
                "redaction.stored_turns: false needs before_judging: false (the judged turn is"
                " the stored turn; storing raw text while judging redacted text is not supported)"
            )
        self._key = read_secret(
            "redaction.",
            self.key,
            self.key_env,
            self.key_file,
            env_field="key_env",
            file_field="key_file",
        )
        return self

    @property
    def active(self) -> bool:
        """Whether the pipeline redacts turns at all (for the judges or for storage)."""
        return self.enabled and (self.before_judging or self.stored_turns)

    def resolve_key(self) -> bytes | None:
        """The pseudonymization key from ``key``, else ``key_env``, else ``key_file`` (read
        once, when the settings were built; a screening process gets it with the config)."""
        value = self._key.get()
        if value is None:
            return None
        if len(value.encode()) < _MIN_KEY_BYTES:
            raise ConfigError(f"redaction key: at least {_MIN_KEY_BYTES} bytes, please")
        return value.encode()

    def policy(self) -> RedactionPolicy:
        return RedactionPolicy(
            emails=self.emails,
            phones=self.phones,
            cards=self.cards,
            ibans=self.ibans,
            secrets=self.secrets,
            ips=self.ips,
            hostnames=self.hostnames,
            phone_region=self.phone_region,
            patterns={name: re.compile(p) for name, p in self.patterns.items()},
            key=self.resolve_key(),
            max_chars=self.max_chars,
        )
