"""The Evaluator: one turn in, one Verdict out. What the batch CLI and the daemon call.

There is one implementation, ``monitor.judging.panel.JudgePanel``: with one primary it is a single
judge, with two primaries (and an arbiter) it is the DAFE panel. It is thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING, Protocol

import structlog

from monitor.config.settings import Settings
from monitor.judging.verdicts import failed_verdict
from monitor.schema.turn import TurnEvent, Verdict

if TYPE_CHECKING:
    from monitor.judging.arbitration import PanelOutcome
    from monitor.judging.panel import JudgePanel


class Evaluator(Protocol):
    @property
    def config_hash(self) -> str:
        """Judge configuration hash: part of the storage idempotency key."""
        ...

    @property
    def weight_profile(self) -> str:
        """The weight profile its verdicts are scored with (recorded on each verdict)."""
        ...

    def evaluate(self, turn: TurnEvent) -> Verdict: ...

    def close(self) -> None: ...


_log = structlog.get_logger(__name__)


def evaluate_guarded(evaluator: Evaluator, turn: TurnEvent) -> Verdict:
    """``evaluator.evaluate(turn)``, with an exception recorded as a ``judge_failed/internal``
    verdict. Evaluators return every anticipated failure as a verdict, so reaching the
    ``except`` is a bug; the turn is still recorded rather than lost or retried forever."""
    try:
        return evaluator.evaluate(turn)
    except Exception:
        _log.exception("evaluator raised", event_id=turn.event_id)
        return failed_verdict(
            turn,
            [],
            "internal",
            weight_profile=evaluator.weight_profile,
            judge_config_hash=evaluator.config_hash,
        )


def build_evaluator(
    settings: Settings,
    *,
    concurrency: int,
    on_panel_result: Callable[[PanelOutcome], None] | None = None,
) -> JudgePanel:
    """The evaluator the settings describe, for ``concurrency`` threads calling ``evaluate`` at
    once; ``on_panel_result`` sees every panel outcome (the exporter's ``record_panel``), so
    disagreement and arbiter counters stay in one place."""
    # Panel and judges imported here: `casewatch schema` stays light.
    from monitor.judging.config_hash import judge_config_hash
    from monitor.judging.factory import build_judge
    from monitor.judging.panel import JudgePanel

    panel = settings.effective_panel()
    # A judge failing to build closes those built before it; once built, the panel owns them.
    with ExitStack() as opened:
        built = []
        for name, role in panel.roles():
            judge = build_judge(name, settings.judge_config(name), role)
            opened.callback(judge.close)
            built.append((judge, role))
        primaries = [judge for judge, role in built if role != "arbiter"]
        arbiter = next((judge for judge, role in built if role == "arbiter"), None)
        evaluator = JudgePanel(
            primaries,
            arbiter,
            panel,
            weights=settings.weights(),
            weight_profile=settings.weight_profile,
            critical=settings.critical_metrics,
            config_hash=judge_config_hash(settings),
            # One pool thread per concurrent caller, so second primaries never queue.
            executor_threads=max(2, concurrency),
            on_result=on_panel_result,
        )
        opened.pop_all()
    return evaluator
