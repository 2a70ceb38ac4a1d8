"""The Evaluator: one turn in, one Verdict out. What the batch CLI and the daemon call.

A single configured judge gives ``SingleJudgeEvaluator``; a judge panel (two primaries and an
arbiter, seed 003) gives the panel evaluator of ``monitor.panel``. Both are thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from monitor.judges.base import Judge
from monitor.judges.factory import build_judge
from monitor.models import TurnEvent, Verdict
from monitor.settings import Settings
from monitor.verdicts import single_judge_verdict


class Evaluator(Protocol):
    @property
    def config_hash(self) -> str:
        """Judge configuration hash: part of the storage idempotency key."""
        ...

    def evaluate(self, turn: TurnEvent) -> Verdict: ...

    def close(self) -> None: ...


class SingleJudgeEvaluator:
    def __init__(self, judge: Judge, settings: Settings) -> None:
        self._judge = judge
        self._weights = settings.weights()
        self._profile = settings.weight_profile
        self._critical = tuple(settings.critical_metrics)
        self._hash = settings.judge_config_hash()

    @property
    def config_hash(self) -> str:
        return self._hash

    def evaluate(self, turn: TurnEvent) -> Verdict:
        judgment = self._judge.judge(turn)
        return single_judge_verdict(
            turn,
            judgment,
            weights=self._weights,
            weight_profile=self._profile,
            critical=self._critical,
            judge_config_hash=self._hash,
        )

    def close(self) -> None:
        self._judge.close()


if TYPE_CHECKING:
    from monitor.panel import PanelOutcome


def build_evaluator(
    settings: Settings, *, on_panel_result: Callable[[PanelOutcome], None] | None = None
) -> Evaluator:
    """The evaluator the settings describe; ``on_panel_result`` sees every panel outcome
    (the exporter's ``record_panel``), so disagreement and arbiter counters stay in one place."""
    panel = settings.effective_panel()
    if len(panel.primaries) == 1 and panel.arbiter is None:
        return SingleJudgeEvaluator(build_judge(panel.primaries[0], settings), settings)
    from monitor.panel import JudgePanel  # built with the arbitration issue

    return JudgePanel.from_settings(settings, on_result=on_panel_result)
