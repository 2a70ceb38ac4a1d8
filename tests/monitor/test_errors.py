"""The shared error helpers: bounded details and pydantic errors without the offending values."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from monitor.errors import (
    BrokerError,
    TransportError,
    TurnFileError,
    truncate,
    validation_error_lines,
)


class _Doc(BaseModel):
    a: int
    b: int
    c: int


def _error(**values: object) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        _Doc.model_validate(values)
    return info.value


def test_truncate_keeps_short_text_and_marks_a_cut() -> None:
    assert truncate("abc", 3) == "abc"
    cut = truncate("abcdef", 4)
    assert cut == "abc…" and len(cut) == 4


def test_validation_error_lines_name_the_location_not_the_value() -> None:
    lines = validation_error_lines(_error(a="secret-token", b=1, c=2))
    assert lines == ["a: Input should be a valid integer, unable to parse string as an integer"]
    assert "secret-token" not in " ".join(lines)


def test_validation_error_lines_past_the_limit_say_how_many_more() -> None:
    lines = validation_error_lines(_error(), limit=1)
    assert lines == ["a: Field required", "... and 2 more error(s)"]


def test_file_and_broker_failures_share_the_transport_parent() -> None:
    assert issubclass(BrokerError, TransportError)
    assert issubclass(TurnFileError, TransportError)
    assert not issubclass(TurnFileError, BrokerError)


# ---------------------------------------------------------------- one exception tree

_ROOT = Path(__file__).resolve().parents[2]
_BUILTIN_EXCEPTIONS = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}


def _source_files() -> list[Path]:
    return sorted(
        path
        for package in ("monitor", "consumers")
        for path in (_ROOT / package).rglob("*.py")
        if "migrations" not in path.parts or path.name == "env.py"
    )


def _shown(path: Path) -> str:
    return str(path.relative_to(_ROOT)) if path.is_relative_to(_ROOT) else path.name


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def exception_classes_outside_errors(files: list[Path]) -> list[str]:
    """``path:line name`` of every class deriving from an exception (a builtin one or one of
    ``monitor.errors``, directly or through another such class) outside ``monitor/errors.py``."""
    errors_py = _ROOT / "monitor" / "errors.py"
    exceptions = set(_BUILTIN_EXCEPTIONS)
    exceptions.update(
        node.name
        for node in ast.walk(ast.parse(errors_py.read_text()))
        if isinstance(node, ast.ClassDef)
    )
    classes = [
        (path, node)
        for path in files
        if path != errors_py
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
    ]
    found: list[str] = []
    grew = True
    while grew:  # a class deriving from one found outside counts too
        grew = False
        for path, node in classes:
            if node.name in exceptions and any(f.endswith(f" {node.name}") for f in found):
                continue
            if any(_base_name(base) in exceptions for base in node.bases):
                exceptions.add(node.name)
                found.append(f"{_shown(path)}:{node.lineno} {node.name}")
                grew = True
    return sorted(set(found))


def test_every_exception_casewatch_defines_is_in_errors_py() -> None:
    # Callers catch casewatch's failures by the one tree in monitor/errors.py; an exception
    # class defined beside its raiser is one a caller cannot find there.
    assert exception_classes_outside_errors(_source_files()) == []


def test_the_check_finds_an_exception_defined_elsewhere(tmp_path: Path) -> None:
    module = tmp_path / "elsewhere.py"
    module.write_text(
        "from monitor.errors import JudgeError\n"
        "class Quiet(Exception): ...\n"
        "class Louder(Quiet): ...\n"
        "class Judged(JudgeError): ...\n"
        "class Plain: ...\n"
    )
    found = sorted(line.split(" ", 1)[1] for line in exception_classes_outside_errors([module]))
    assert found == ["Judged", "Louder", "Quiet"]


def _catches_runtime_error(handler: ast.ExceptHandler) -> bool:
    caught = handler.type
    names = caught.elts if isinstance(caught, ast.Tuple) else [caught] if caught else []
    return any(_base_name(name) == "RuntimeError" for name in names)


def test_no_module_signals_itself_with_runtime_error() -> None:
    # RuntimeError is what a bug or a misuse raises (and what stdlib executors and HTTP clients
    # raise once closed). A module that raises it and catches it too uses it as a signal: a
    # failure casewatch means to handle has a type of its own in errors.py (screening off, an
    # unreadable response), so no handler of it also catches a bug.
    both = []
    for path in _source_files():
        nodes = list(ast.walk(ast.parse(path.read_text())))
        raises = any(
            isinstance(node, ast.Raise)
            and node.exc is not None
            and _base_name(node.exc.func if isinstance(node.exc, ast.Call) else node.exc)
            == "RuntimeError"
            for node in nodes
        )
        catches = any(
            isinstance(node, ast.ExceptHandler) and _catches_runtime_error(node) for node in nodes
        )
        if raises and catches:
            both.append(str(path.relative_to(_ROOT)))
    assert both == []
