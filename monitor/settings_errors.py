"""Operator-facing messages for a configuration that cannot be read.

``monitor.settings`` builds the settings; this module turns what goes wrong reading them into a
``ConfigError`` that says what to write instead: a YAML syntax error names the file, line and
column; a list where a mapping belongs says a mapping is expected; an environment value that is
not JSON where a list or mapping is expected shows the JSON to write; an API key written into a
config file is refused, as the Helm chart's values schema refuses it.
"""

from __future__ import annotations

import json
import os
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic_settings import YamlConfigSettingsSource

from monitor.errors import ConfigError


def yaml_syntax_error(path: Path, exc: yaml.YAMLError) -> ConfigError:
    """``FILE:LINE:COLUMN: YAML syntax error: PROBLEM`` on one line."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return ConfigError(f"{where}: YAML syntax error: {problem}")


class CheckedYamlSource(YamlConfigSettingsSource):
    """The YAML file source, refusing what would otherwise fail obscurely or leak a secret."""

    def _read_file(self, file_path: Any) -> dict[str, Any]:
        try:
            with Path(file_path).open(encoding="utf-8") as handle:
                doc = yaml.safe_load(handle)
        except yaml.YAMLError as exc:
            raise yaml_syntax_error(Path(file_path), exc) from None
        if doc is None:
            return {}
        if not isinstance(doc, dict):
            raise ConfigError(
                f"{file_path}: the top level must be a mapping of sections (kafka:, storage:, "
                f"judges:, ...), not a {_yaml_kind(doc)}: write `kafka:` rather than `- kafka`"
            )
        _refuse_inline_keys(Path(file_path), doc)
        return doc


def _refuse_inline_keys(path: Path, doc: Mapping[str, Any]) -> None:
    judges = doc.get("judges")
    if not isinstance(judges, Mapping):
        return
    for name, judge in judges.items():
        if isinstance(judge, Mapping) and "api_key" in judge:
            raise ConfigError(
                f"{path}: judges.{name}.api_key: API keys are not read from a config file "
                "(it would sit in plain text with the settings); set "
                f"judges.{name}.api_key_env to the name of an environment variable holding "
                f"the key, or judges.{name}.api_key_file to a file containing it"
            )


def _yaml_kind(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    return type(value).__name__


def mapping_expected(loc: str, got: object) -> str:
    """The line for a section given as something other than a mapping."""
    last = loc.rsplit(".", 1)[-1]
    return (
        f"{loc}: expected a mapping of settings (indented `key: value` lines under `{last}:`), "
        f"got a {_yaml_kind(got)}"
    )


def env_value_errors(model: type[BaseModel], prefix: str, delimiter: str) -> list[str]:
    """One line per environment variable holding a non-JSON value where the setting it names
    is a list or a mapping (pydantic-settings parses those as JSON). Values of secret settings
    are never echoed."""
    lines = []
    for name, value in sorted(os.environ.items()):
        if not name.upper().startswith(prefix.upper()):
            continue
        path = name[len(prefix) :].lower().split(delimiter)
        found = _complex_field(model, path)
        if found is None:
            continue
        kind, secret = found
        try:
            json.loads(value)
        except ValueError:
            if kind == "list" and not secret:
                example = json.dumps([v.strip() for v in value.split(",")])
            else:
                example = '["first", "second"]' if kind == "list" else '{"key": "value"}'
            lines.append(f"{name}: expected a JSON {kind}, e.g. {name}='{example}'")
    return lines


def _complex_field(model: type[BaseModel], path: list[str]) -> tuple[str, bool] | None:
    """(``list`` or ``mapping``, holds secrets) when ``path`` names such a field of ``model``."""
    current: Any = model
    for i, part in enumerate(path):
        fields = getattr(current, "model_fields", None)
        if fields is None or part not in fields:
            return None
        annotation = _unwrap(fields[part].annotation)
        if i < len(path) - 1:
            current = annotation
            continue
        secret = "SecretStr" in repr(annotation)
        origin = typing.get_origin(annotation)
        if origin in (list, set, tuple, frozenset):
            return "list", secret
        if origin in (dict, Mapping) or (
            isinstance(annotation, type) and issubclass(annotation, BaseModel)
        ):
            return "mapping", secret
        return None
    return None


def _unwrap(annotation: Any) -> Any:
    """``X | None`` → ``X``."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return args[0] if len(args) == 1 else annotation
    return annotation


__all__ = [
    "CheckedYamlSource",
    "env_value_errors",
    "mapping_expected",
    "yaml_syntax_error",
]
