"""What every configuration section shares: unknown keys refused, frozen once built, and an
endpoint's key read once.

Every section of ``monitor/config/`` derives from ``Section``; ``monitor.config.settings`` holds
them in
``Settings``, checks what spans sections and loads them. A section is pure pydantic: the only
thing one reads while it is built is a secret it names (``monitor/config/secrets.py``).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, SecretStr

from monitor.config.secrets import Secret, read_secret


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def read_key(what: str, inline: SecretStr | None, env: str | None, file: Path | None) -> Secret:
    # Endpoint keys are read once, here, when the settings are built at the entrypoint.
    return read_secret(
        f"{what} ", inline, env, file, env_field="api_key_env", file_field="api_key_file"
    )
