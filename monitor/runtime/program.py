"""How to name this program, and how to install one of its extras, in lines a person pastes.

``make run`` builds a virtual environment and never activates it, so a printed ``casewatch
inspect ...`` fails with "command not found" in the shell that ran it. Every command line
casewatch prints goes through ``casewatch_program`` (``.venv/bin/casewatch`` there, plain
``casewatch`` once the name on PATH is this very program), and every "install the extra" hint
through ``install_extra`` (the venv's pip; ``-e '.[extra]'`` from a checkout's editable install).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

# The checkout this module runs from, when it runs from one (an editable install or the
# source tree): pyproject.toml beside the package.
_CHECKOUT = Path(__file__).resolve().parents[2]


def _relative(path: Path, cwd: Path | None) -> str:
    """``path`` relative to ``cwd`` when it lies below it (``./x`` for a bare name), else
    absolute; not resolved, so a venv's ``bin/`` keeps its own path, not the interpreter's."""
    absolute = path.absolute()
    try:
        relative = absolute.relative_to((cwd or Path.cwd()).absolute())
    except ValueError:
        return str(absolute)
    return str(relative) if len(relative.parts) > 1 else f"./{relative}"


def _script(name: str) -> Path:
    """The ``name`` script of this environment: beside ``sys.argv[0]`` when that is the
    ``casewatch`` script, else beside the interpreter (``python -m monitor.cli``)."""
    argv0 = Path(sys.argv[0])
    bindir = argv0.parent if argv0.name == "casewatch" else Path(sys.executable).parent
    return bindir / name


def _runnable(name: str, cwd: Path | None) -> str:
    script = _script(name)
    on_path = shutil.which(name)
    if on_path is not None and Path(on_path).resolve() == script.resolve():
        return name
    return _relative(script, cwd)


def casewatch_program(cwd: Path | None = None) -> str:
    """The ``casewatch`` command as printed lines should run it from ``cwd``: plain
    ``casewatch`` when that name on PATH is this very program, else this environment's script
    (``.venv/bin/casewatch`` after ``make run``: the venv is not activated)."""
    return _runnable("casewatch", cwd)


def python_program(cwd: Path | None = None) -> str:
    """This environment's Python as printed lines should run it from ``cwd`` (for the
    repository's example scripts): ``python`` only when that name on PATH is this very
    environment's, else its path (``.venv/bin/python``). Compared unresolved: a venv's python
    is a symlink to the system's, which lacks casewatch's dependencies."""
    script = _script("python")
    on_path = shutil.which("python")
    if on_path is not None and Path(on_path).absolute() == script.absolute():
        return "python"
    return _relative(script, cwd)


def install_extra(extra: str, cwd: Path | None = None) -> str:
    """The command that installs casewatch's ``extra`` into this environment: the
    environment's own pip (``.venv/bin/pip``), with ``-e`` on the checkout when casewatch runs
    from one (what ``make run`` built), else the published package."""
    pip = f"{_runnable('pip', cwd)} install"
    if (_CHECKOUT / "pyproject.toml").is_file():
        here = "." if (cwd or Path.cwd()).resolve() == _CHECKOUT else _relative(_CHECKOUT, cwd)
        return f"{pip} -e '{here}[{extra}]'"
    return f"{pip} 'casewatch[{extra}]'"


__all__ = ["casewatch_program", "install_extra", "python_program"]
