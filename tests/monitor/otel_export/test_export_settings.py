"""otel_export headers come from the environment or a file, never the config; a missing one is
a ConfigError naming the field when the headers are asked for."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.config.otel import OtelExportConfig
from monitor.errors import ConfigError


def test_headers_from_env_and_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OTLP_TOKEN", "Bearer abc")
    path = tmp_path / "headers"
    path.write_text("x-tenant: acme\n\n")
    config = OtelExportConfig(
        endpoint="http://collector:4318",
        headers_env={"authorization": "OTLP_TOKEN"},
        headers_file=path,
    )
    assert config.resolve_headers() == {"authorization": "Bearer abc", "x-tenant": "acme"}


def test_a_missing_header_variable_names_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOPE_TOKEN", raising=False)
    config = OtelExportConfig(endpoint="http://c:4318", headers_env={"authorization": "NOPE_TOKEN"})
    with pytest.raises(ConfigError, match=r"otel_export\.headers_env\.authorization: .*NOPE_TOKEN"):
        config.resolve_headers()


def test_the_endpoint_must_be_http() -> None:
    with pytest.raises(ValueError, match="endpoint"):
        OtelExportConfig(endpoint="collector:4318")
