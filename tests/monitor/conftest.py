"""Fixtures shared by the monitor tests."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from monitor.runtime.clock import ManualClock

# Settings the developer's environment may hold that the command tests set themselves (the
# suite's own CASEWATCH_SAMPLING stays: tests/conftest.py).
_DEVELOPER_SETTINGS = (
    "CASEWATCH_STORAGE__URL",
    "CASEWATCH_STORAGE__RETENTION_DAYS",
    "CASEWATCH_DRIFT__MIN_TURNS",
)


@pytest.fixture
def registry() -> CollectorRegistry:
    """A registry of the test's own: never the process-wide default one."""
    return CollectorRegistry()


@pytest.fixture
def clock() -> ManualClock:
    """Time that moves only when the test says (a test needing a given start overrides it)."""
    return ManualClock()


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """The CLI invoked in-process. Settings come from the environment too: the developer's own
    must not leak in."""
    for var in _DEVELOPER_SETTINGS:
        monkeypatch.delenv(var, raising=False)
    return CliRunner()
