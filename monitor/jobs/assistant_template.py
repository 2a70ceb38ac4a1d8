"""Request templates and answer selectors for assistants behind a JSON HTTP API (pure).

``render(template, values)`` walks a JSON-like template: a string that is exactly one
placeholder ("{{history}}") becomes the value itself (a list stays a list); placeholders
inside longer strings are replaced by their text. An unknown placeholder is an error, so a
typo in the configuration fails loudly instead of sending "{{qeury}}" to production.

``select(document, path)`` reads a JSONPath-like selector: ``$`` then ``.key`` or
``['key']`` or ``[index]`` steps, e.g. ``$.choices[0].message.content``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from monitor.errors import TemplateError

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}")
_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]|\[['\"]([^'\"]+)['\"]\]")


def render(template: Any, values: Mapping[str, Any]) -> Any:
    if isinstance(template, str):
        whole = _PLACEHOLDER.fullmatch(template.strip())
        if whole:
            return _value(whole.group(1), values)
        return _PLACEHOLDER.sub(lambda m: _text(_value(m.group(1), values)), template)
    if isinstance(template, list):
        return [render(item, values) for item in template]
    if isinstance(template, dict):
        return {key: render(item, values) for key, item in template.items()}
    return template


def _value(name: str, values: Mapping[str, Any]) -> Any:
    if name not in values:
        raise TemplateError(f"unknown placeholder {{{{{name}}}}}; known: {', '.join(values)}")
    return values[name]


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def parse_path(path: str) -> list[str | int]:
    path = path.strip()
    if not path.startswith("$"):
        raise TemplateError(f"answer_path {path!r} must start with '$'")
    steps: list[str | int] = []
    pos = 1
    while pos < len(path):
        match = _STEP.match(path, pos)
        if match is None:
            raise TemplateError(f"answer_path {path!r}: cannot read {path[pos:]!r}")
        key, index, quoted = match.groups()
        steps.append(int(index) if index is not None else (key or quoted))
        pos = match.end()
    return steps


def select(document: Any, path: str) -> Any:
    """The value at ``path``; TemplateError naming the first missing step."""
    current = document
    for step in parse_path(path):
        if isinstance(step, int):
            if not isinstance(current, list) or step >= len(current):
                raise TemplateError(f"answer_path {path!r}: no item [{step}]")
            current = current[step]
        else:
            if not isinstance(current, dict) or step not in current:
                raise TemplateError(f"answer_path {path!r}: no key {step!r}")
            current = current[step]
    return current


__all__ = ["TemplateError", "parse_path", "render", "select"]
