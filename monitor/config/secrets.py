"""Reading one secret (an endpoint's key, the redaction key) the one way casewatch reads them.

Inline (a ``SecretStr``; settings refuse one from a config file), else from the environment
variable a setting names, else from a file (stripped). Read once, when the settings are built
at the entrypoint: components get the value from their config and never read the environment
or a file themselves. A failure is kept and raised (``ConfigError``) when the secret is asked
for, so a command that never uses it does not fail on it; the prepare step at the entrypoint
asks for every secret the command will use.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr

from monitor.errors import ConfigError


@dataclass(frozen=True)
class Secret:
    """A secret as read: its value (None when none is configured) or why it could not be."""

    value: str | None = None
    error: str | None = None

    def get(self) -> str | None:
        if self.error is not None:
            raise ConfigError(self.error)
        return self.value

    def __repr__(self) -> str:  # never the value, in a log line or a traceback
        return f"Secret(set={self.value is not None}, error={self.error!r})"


def read_secret(
    where: str,
    inline: SecretStr | None,
    env: str | None,
    file: Path | None,
    *,
    env_field: str,
    file_field: str,
) -> Secret:
    """The secret from ``inline``, else the variable ``env``, else ``file``; ``where`` and the
    field names word the error (``f"{where}{env_field}: ..."``)."""
    if inline is not None:
        return Secret(inline.get_secret_value())
    if env:
        value = os.environ.get(env)
        if value is None:
            return Secret(error=f"{where}{env_field}: environment variable {env} is not set")
        return Secret(value)
    if file:
        try:
            return Secret(file.read_text(encoding="utf-8").strip())
        except OSError as exc:
            return Secret(error=f"{where}{file_field}: cannot read {file}: {exc}")
    return Secret()


__all__ = ["Secret", "read_secret"]
