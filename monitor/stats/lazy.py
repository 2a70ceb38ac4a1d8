"""A module imported on first attribute access (pure; no I/O).

scipy.stats and scikit-learn cost ~85 MB of RSS and ~3 s of start-up, and every ``casewatch``
process imports the statistics modules (the CLI registers all commands), including ``casewatch
run``, which needs them only when a job (drift) actually runs a test. Modules that use them
write ``st = LazyModule("scipy.stats")`` instead of ``from scipy import stats as st``.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attr)

    def __repr__(self) -> str:
        state = "imported" if self._module is not None else "not imported yet"
        return f"<LazyModule {self._name!r} ({state})>"
