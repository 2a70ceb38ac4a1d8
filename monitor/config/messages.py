"""Operator-facing messages for a configuration that cannot be read.

``monitor.config.settings`` builds the settings; this module turns what goes wrong reading them
into a
``ConfigError`` that says what to write instead: a YAML syntax error names the file, line and
column; a list where a mapping belongs says a mapping is expected; an environment value that is
not JSON where a list or mapping is expected shows the JSON to write; an API key written into a
config file is refused, as the Helm chart's values schema refuses it; an unknown key gets the
closest known one ("did you mean"); a bad value that came from a ``CASEWATCH_*`` variable is
reported under the variable's name; a check that spans sections reads without pydantic's
``Value error,`` wrapping.
"""

from __future__ import annotations

import difflib
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


def unknown_key(model: type[BaseModel], loc: tuple[str | int, ...]) -> str:
    """The line for a key no section declares: the closest known keys of the same section, or
    every known key when none is close (a typo of one letter is the common case)."""
    where = ".".join(str(p) for p in loc)
    known = _keys_at(model, loc[:-1])
    if not known:
        return f"{where}: unknown key"
    close = difflib.get_close_matches(str(loc[-1]), known, n=3, cutoff=0.6)
    if close:
        return f"{where}: unknown key; did you mean {' or '.join(close)}?"
    return f"{where}: unknown key; known here: {', '.join(sorted(known))}"


def _keys_at(model: type[BaseModel], path: tuple[str | int, ...]) -> list[str]:
    """The field names of the section ``path`` leads to (through dict values and list items),
    or none when it does not lead to a section."""
    current: Any = model
    for part in path:
        fields = getattr(current, "model_fields", None)
        if isinstance(current, type) and fields is not None:
            if not isinstance(part, str) or part not in fields:
                return []
            current = _unwrap(fields[part].annotation)
            continue
        origin = typing.get_origin(current)
        args = typing.get_args(current)
        if origin in (dict, Mapping) and len(args) == 2:
            current = _unwrap(args[1])
        elif origin in (list, tuple, set, frozenset) and args:
            current = _unwrap(args[0])
        else:
            return []
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def env_variable_for(
    loc: tuple[str | int, ...], prefix: str, delimiter: str, environ: Mapping[str, str]
) -> str | None:
    """The ``CASEWATCH_*`` variable that set the value at ``loc``, when one is set: the one
    naming it, or one holding a section as JSON that has the value (the environment outranks
    the file, so that is where the value came from)."""
    names = {name.upper(): name for name in environ if name.upper().startswith(prefix.upper())}
    for end in range(len(loc), 0, -1):
        name = names.get((prefix + delimiter.join(str(p) for p in loc[:end])).upper())
        if name is None:
            continue
        if end == len(loc) or _holds(environ[name], loc[end:]):
            return name
    return None


def _holds(text: str, path: tuple[str | int, ...]) -> bool:
    """Whether the JSON ``text`` has a value at ``path``."""
    try:
        value: Any = json.loads(text)
    except ValueError:
        return False
    for part in path:
        if isinstance(value, dict) and str(part) in value:
            value = value[str(part)]
        elif isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
            value = value[part]
        else:
            return False
    return True


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
    "env_variable_for",
    "mapping_expected",
    "unknown_key",
    "yaml_syntax_error",
]
