"""The Evaluator: one turn in, one Verdict out. What the batch CLI and the daemon call.

There is one implementation, ``monitor.panel.JudgePanel``: with one primary it is a single
judge, with two primaries (and an arbiter) it is the seed-003 panel. It is thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from monitor.models import TurnEvent, Verdict
from monitor.settings import Settings

if TYPE_CHECKING:
    from monitor.panel import PanelOutcome


class Evaluator(Protocol):
    @property
    def config_hash(self) -> str:
        """Judge configuration hash: part of the storage idempotency key."""
        ...

    def evaluate(self, turn: TurnEvent) -> Verdict: ...

    def close(self) -> None: ...


def build_evaluator(
    settings: Settings, *, on_panel_result: Callable[[PanelOutcome], None] | None = None
) -> Evaluator:
    """The evaluator the settings describe; ``on_panel_result`` sees every panel outcome
    (the exporter's ``record_panel``), so disagreement and arbiter counters stay in one place."""
    from monitor.panel import JudgePanel  # panel imports judges; keep `casewatch schema` light

    return JudgePanel.from_settings(settings, on_result=on_panel_result)
