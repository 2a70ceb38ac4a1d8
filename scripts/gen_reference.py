"""The configuration and metric reference pages of the documentation site, read off the code.

The configuration reference walks ``monitor.config.settings.Settings`` and every section it holds
(``monitor.redaction.config.RedactionConfig`` included): each key's dotted path, type, default,
bounds, environment variable and description (the field's ``description``, else the comment
written above it in the source). The metric reference instantiates
``monitor.metrics.exporter.Metrics`` on a throwaway registry: each family's exported name, type,
labels, help text, histogram buckets and the comment above its declaration. Nothing is copied
by hand: `make docs` rewrites both pages before building the site, and
tests/test_readme_docs.py fails while a committed page differs from what this script writes.

    .venv/bin/python scripts/gen_reference.py          # rewrite docs/reference/*.md
    .venv/bin/python scripts/gen_reference.py --check  # exit 1 if one is out of date
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import re
import sys
import textwrap
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

DOCS = ROOT / "docs"
CONFIGURATION_PAGE = "reference/configuration.md"
METRICS_PAGE = "reference/metrics.md"


# ---------------------------------------------------------------- comments in the source


def _comments_above(source_lines: list[str], lineno: int) -> str:
    """The ``#`` comment block directly above line ``lineno`` (1-based), else the comment that
    ends the line itself; joined into one paragraph."""
    block: list[str] = []
    i = lineno - 2
    while i >= 0 and source_lines[i].strip().startswith("#"):
        block.insert(0, source_lines[i].strip().lstrip("#").strip())
        i -= 1
    text = " ".join(line for line in block if line and not line.startswith("---"))
    if text:
        return text
    line = source_lines[lineno - 1]
    if "  # " in line:
        return line.split("  # ", 1)[1].strip()
    return ""


def _field_comments(cls: type) -> dict[str, str]:
    """Field name -> the comment written above its declaration in ``cls``'s class body."""
    try:
        lines, _start = inspect.getsourcelines(cls)
    except (OSError, TypeError):
        return {}
    source = textwrap.dedent("".join(lines))
    tree = ast.parse(source)
    body = tree.body[0]
    if not isinstance(body, ast.ClassDef):
        raise TypeError(f"{cls.__name__} is not a class")
    src_lines = source.splitlines()
    out: dict[str, str] = {}
    for node in body.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = _comments_above(src_lines, node.lineno)
    return out


# ---------------------------------------------------------------- configuration


@dataclass(frozen=True)
class Setting:
    key: str  # dotted path; <name> for a mapping's keys, [] for a list's items
    type: str
    default: str
    bounds: str
    env: str | None
    description: str


def _first_paragraph(doc: str | None) -> str:
    return " ".join(inspect.cleandoc(doc).split("\n\n", 1)[0].split()) if doc else ""


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin is typing.Literal:
        return " \\| ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in args)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"map of {_type_name(args[0])} to {_type_name(args[1])}"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return "section"
        if issubclass(annotation, SecretStr):
            return "secret"
        if issubclass(annotation, Path):
            return "path"
        if issubclass(annotation, datetime):
            return "datetime (ISO 8601)"
        return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(
            annotation.__name__, annotation.__name__
        )
    if annotation is Any:
        return "any"
    return str(annotation)


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return "(section)"
    if isinstance(value, Path):
        value = str(value)
    return f"`{json.dumps(value, default=str)}`"


_BOUNDS = (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="))


def _bounds(field: FieldInfo) -> str:
    parts: list[str] = []
    for meta in field.metadata:
        for attr, sign in _BOUNDS:
            value = getattr(meta, attr, None)
            if value is not None:
                parts.append(f"{sign} {value:g}")
        for attr, what in (("min_length", "at least"), ("max_length", "at most")):
            value = getattr(meta, attr, None)
            if value is not None:
                parts.append(f"{what} {value} long")
        pattern = getattr(meta, "pattern", None)
        if pattern is not None:
            parts.append(f"matches `{pattern}`")
    return ", ".join(parts)


def _models_in(annotation: Any) -> Iterator[tuple[str, type[BaseModel]]]:
    """(path suffix, model) for the sections an annotation holds: itself, a list's items
    (``[]``), a mapping's values (``.<name>``)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield "", annotation
    elif origin in (typing.Union, types.UnionType, typing.Annotated):
        for arg in args if origin is not typing.Annotated else args[:1]:
            yield from _models_in(arg)
    elif origin is list:
        for suffix, model in _models_in(args[0]):
            yield "[]" + suffix, model
    elif origin is dict:
        for suffix, model in _models_in(args[1]):
            yield ".<name>" + suffix, model


def settings_rows(model: type[BaseModel] | None = None, prefix: str = "") -> list[Setting]:
    """Every key of the settings, sections before their keys, in declaration order."""
    if model is None:
        from monitor.config.settings import Settings

        model = Settings
    comments = _field_comments(model)
    rows: list[Setting] = []
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        env = None
        if "[]" not in key:
            env = "CASEWATCH_" + key.upper().replace(".", "__")
        annotation = field.annotation
        sections = [model for _suffix, model in _models_in(annotation)]
        description = (
            field.description
            or (_first_paragraph(sections[0].__doc__) if sections else "")
            or comments.get(name, "")
        )
        if "secret" in _type_name(annotation).split(" "):
            description = f"{description} A secret: never logged or printed.".strip()
        rows.append(
            Setting(
                key=key,
                type=_type_name(annotation),
                default=_default(field),
                bounds=_bounds(field),
                env=env,
                description=description,
            )
        )
        for suffix, sub in _models_in(annotation):
            rows.extend(settings_rows(sub, f"{key}{suffix}."))
    return rows


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell: pipes escaped, one line."""
    return re.sub(r"(?<!\\)\|", r"\\|", text).replace("\n", " ")


def configuration_reference() -> str:
    from monitor.config.settings import Settings

    rows = settings_rows(Settings)
    out = [
        "# Configuration reference",
        "",
        "<!-- generated by scripts/gen_reference.py from monitor/config/settings.py and the"
        " sections it holds (monitor/config/); edit the code, not this page -->",
        "",
        "Every key casewatch reads, generated from the settings' code"
        " (`scripts/gen_reference.py`; `make docs` rewrites this page)."
        " Keys are written in the YAML file given with `--config`, or as environment variables"
        " (`CASEWATCH_` and the path in capitals, sections joined by `__`; lists and mappings"
        " as JSON). The environment beats the file, the file beats the defaults; a bad value"
        " stops the program at start naming the key. How to write the file, with an example:"
        " [Configuration](../configuration.md).",
        "",
        f"{len(rows)} keys. `<name>` stands for a key you choose (a judge's name, an"
        " assistant's), `[]` for each item of a list.",
        "",
    ]
    sections: dict[str, list[Setting]] = {}
    for row in rows:
        sections.setdefault(row.key.split(".", 1)[0].split("[", 1)[0], []).append(row)
    top = [r for r in rows if "." not in r.key and "[" not in r.key and r.type != "section"]
    out += ["## Top-level keys", ""]
    out += _table([r for r in top])
    for section, members in sections.items():
        head, *keys = members
        if head.type != "section" and not keys:
            continue
        out += ["", f"## `{section}`", ""]
        if head.description:
            out += [head.description, ""]
        out += _table(keys or [head])
    return "\n".join(out) + "\n"


def _table(rows: list[Setting]) -> list[str]:
    lines = [
        "| key | type | default | bounds | description |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        env = f"<br>`{row.env}`" if row.env else ""
        lines.append(
            f"| `{row.key}`{env} | {row.type} | {row.default if row.type != 'section' else ''}"
            f" | {_cell(row.bounds)} | {_cell(row.description)} |"
        )
    return lines


# ---------------------------------------------------------------- metrics


@dataclass(frozen=True)
class MetricRow:
    name: str  # as exported (counters with _total)
    type: str
    labels: tuple[str, ...]
    help: str
    comment: str
    buckets: tuple[float, ...]


def metric_rows() -> list[MetricRow]:
    """Every family ``Metrics`` declares, in declaration order."""
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

    from monitor.metrics import exporter

    metrics = exporter.Metrics(CollectorRegistry())
    comments = _assignment_comments(exporter.Metrics.__init__)
    rows: list[MetricRow] = []
    for attr, value in vars(metrics).items():
        if not isinstance(value, Counter | Gauge | Histogram):
            continue
        kind = value._type
        name = value._name + ("_total" if kind == "counter" else "")
        buckets: tuple[float, ...] = ()
        if isinstance(value, Histogram):
            buckets = tuple(b for b in value._upper_bounds if b != float("inf"))
        rows.append(
            MetricRow(
                name=name,
                type=kind,
                labels=tuple(value._labelnames),
                help=value._documentation,
                comment=comments.get(attr, ""),
                buckets=buckets,
            )
        )
    return rows


def _assignment_comments(function: Any) -> dict[str, str]:
    """``self.<attr>`` -> the comment block above its assignment in ``function``."""
    lines, _start = inspect.getsourcelines(function)
    source = textwrap.dedent("".join(lines))
    src_lines = source.splitlines()
    out: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                    out[target.attr] = _comments_above(src_lines, node.lineno)
    return out


def metrics_reference() -> str:
    from monitor.metrics.exporter import DEFAULT_MAX_LABEL_VALUES, OTHER

    rows = metric_rows()
    out = [
        "# Metric reference",
        "",
        "<!-- generated by scripts/gen_reference.py from monitor/metrics/exporter.py; edit the"
        " code, not this page -->",
        "",
        f"Every metric casewatch exports on `/metrics` ({len(rows)} families), generated from"
        " their declarations in `monitor/metrics/exporter.py` (`scripts/gen_reference.py`;"
        " `make docs` rewrites this page). The rules in"
        " `rules/` and the dashboards read only these names (the tests check it). Labels are"
        " bounded: never a conversation or event id; assistant names come from the events, so"
        f" at most {DEFAULT_MAX_LABEL_VALUES} distinct ones are exported and later ones become"
        f" `{OTHER}`. What each answers, with the values its labels take:"
        " [Metrics](../metrics.md).",
        "",
        "| metric | type | labels | help | notes |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        labels = ", ".join(f"`{label}`" for label in row.labels) or "-"
        notes = row.comment
        if row.buckets:
            bounds = ", ".join(f"{b:g}" for b in row.buckets)
            notes = f"{notes} Buckets: {bounds}.".strip()
        out.append(f"| `{row.name}` | {row.type} | {labels} | {_cell(row.help)} | {_cell(notes)} |")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- entry point


def pages() -> dict[str, str]:
    """The generated pages: path under docs/ -> Markdown."""
    return {CONFIGURATION_PAGE: configuration_reference(), METRICS_PAGE: metrics_reference()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the generated reference pages.")
    parser.add_argument("--check", action="store_true", help="Exit 1 if a page is stale.")
    parser.add_argument("--out", type=Path, default=DOCS, help="Directory (default: docs/).")
    args = parser.parse_args(argv)
    stale = []
    for path, text in pages().items():
        target = args.out / path
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(path)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        print(f"wrote {target}")
    if stale:
        print(
            f"{', '.join(stale)} out of date with the code: run"
            " `.venv/bin/python scripts/gen_reference.py` (or `make docs`) and commit the result",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
