"""The judge panel (DAFE): two primaries on every turn, an arbiter only on dispute.

Decision table for one turn (``arbitrated`` means "the arbiter was asked"; its Judgment is then
in the Verdict, whatever it answered):

====================================  ===========================  ===========  ==============
primaries                             arbiter                      arbitrated   final
====================================  ===========================  ===========  ==============
both answered, agree                  not asked                    False        mean of two
both answered, disagree               answers                      True         median of 3
both answered, disagree               fails                        True         mean of two
both answered, disagree               none configured              False        mean of two
one failed (trigger primary_failed)   answers                      True         mean of two
one failed                            fails / none configured      True/False   judge_failed
both failed                           not asked (cannot reach 2)   False        judge_failed
====================================  ===========================  ===========  ==============

A panel without an arbiter still records the disagreement trigger: it measures the disagreement
rate (the arbiter budget it would need) before an arbiter is bought. ``judge_failed`` verdicts
of the panel carry the reason ``panel_insufficient`` and keep every judgment for the audit.
A single-primary panel behaves exactly like a single judge.

Thread-safety: ``evaluate`` is called from many threads at once. Per call, the first primary
runs on the calling thread and the second on the panel's own pool, so both run concurrently;
the pool therefore bounds how many second-primary calls are in flight and should be as large
as the callers' concurrency. Nothing else is shared between calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import structlog

from monitor.config.judges import PanelConfig
from monitor.judging import arbitration
from monitor.judging.arbitration import OutcomeObserver, PanelOutcome
from monitor.judging.judge import Judge
from monitor.judging.verdicts import failed_verdict, scored_verdict, single_judge_verdict
from monitor.runtime.workers import DaemonThreadPool
from monitor.schema.turn import JudgeRole, Judgment, TurnEvent, Verdict

PANEL_INSUFFICIENT = "panel_insufficient"

_log = structlog.get_logger(__name__)


class JudgePanel:
    """An Evaluator over one or two primary judges and an optional arbiter."""

    def __init__(
        self,
        primaries: Sequence[Judge],
        arbiter: Judge | None,
        config: PanelConfig,
        *,
        weights: Mapping[str, float],
        weight_profile: str,
        critical: Sequence[str],
        config_hash: str,
        executor_threads: int = 2,
        on_result: OutcomeObserver | None = None,
    ) -> None:
        if not 1 <= len(primaries) <= 2:
            raise ValueError(f"a panel has 1 or 2 primaries, got {len(primaries)}")
        if executor_threads < 1:
            raise ValueError(f"executor_threads must be >= 1, got {executor_threads}")
        self._primaries = tuple(primaries)
        self._arbiter = arbiter
        self._config = config
        self._weights = dict(weights)
        self._profile = weight_profile
        self._critical = tuple(critical)
        self._hash = config_hash
        self.on_result = on_result
        # Threads start lazily on the first submit: a single-primary panel never starts one.
        # Daemon threads: a call abandoned at shutdown does not hold the process's exit.
        self._pool = DaemonThreadPool(executor_threads, "panel-primary")

    @property
    def config_hash(self) -> str:
        return self._hash

    @property
    def weight_profile(self) -> str:
        return self._profile

    @property
    def config(self) -> PanelConfig:
        return self._config

    def close(self) -> None:
        # Not waiting: at a shutdown whose drain timed out, a call in progress may take its whole
        # timeout, and its result is dropped anyway; closing the judges below cuts it short.
        self._pool.shutdown()
        for judge in (*self._primaries, *([self._arbiter] if self._arbiter else [])):
            judge.close()

    # ------------------------------------------------------------------ evaluation

    def evaluate(self, turn: TurnEvent) -> Verdict:
        if len(self._primaries) == 1:
            judgment = _run(self._primaries[0], turn, "single")
            return single_judge_verdict(
                turn,
                judgment,
                weights=self._weights,
                weight_profile=self._profile,
                critical=self._critical,
                judge_config_hash=self._hash,
            )
        first, second = self._judge_primaries(turn)
        verdict, disagreement, side = self._decide(turn, first, second)
        self._notify(turn, verdict, disagreement, side)
        return verdict

    def _judge_primaries(self, turn: TurnEvent) -> tuple[Judgment, Judgment]:
        future = self._pool.submit(_run, self._primaries[1], turn, "primary")
        first = _run(self._primaries[0], turn, "primary")
        return first, future.result()

    def _decide(
        self, turn: TurnEvent, first: Judgment, second: Judgment
    ) -> tuple[Verdict, arbitration.Disagreement, arbitration.Side | None]:
        if first.ok and second.ok and first.scores is not None and second.scores is not None:
            return self._both_answered(
                turn, first, second, first.scores.score_map(), second.scores.score_map()
            )
        return self._primary_failed(turn, first, second)

    def _both_answered(
        self,
        turn: TurnEvent,
        first: Judgment,
        second: Judgment,
        a: Mapping[str, float],
        b: Mapping[str, float],
    ) -> tuple[Verdict, arbitration.Disagreement, arbitration.Side | None]:
        disagreement = arbitration.detect(
            a,
            b,
            self._config.disagreement,
            critical=self._critical,
            threshold=self._config.s_final_threshold,
            weights=self._weights,
        )
        trigger = disagreement.trigger
        if not disagreement.disagree or self._arbiter is None:
            final = arbitration.combine_agree(a, b)
            return self._scored(turn, final, [first, second], trigger=trigger), disagreement, None
        arb = _run(self._arbiter, turn, "arbiter")
        side: arbitration.Side | None = None
        if arb.ok and arb.scores is not None:
            c = arb.scores.score_map()
            final = arbitration.combine_arbitrated([a, b, c])
            side = arbitration.sided_with(a, b, c)
        else:
            final = arbitration.combine_arbitrated([a, b])
        verdict = self._scored(turn, final, [first, second, arb], trigger=trigger, arbitrated=True)
        return verdict, disagreement, side

    def _primary_failed(
        self, turn: TurnEvent, first: Judgment, second: Judgment
    ) -> tuple[Verdict, arbitration.Disagreement, arbitration.Side | None]:
        failed = arbitration.Disagreement(True, arbitration.PRIMARY_FAILED, ())
        judged = [first, second]
        answered = [j.scores.score_map() for j in judged if j.ok and j.scores is not None]
        # With both primaries down even a good arbiter leaves one answer: do not pay for it.
        if answered and self._arbiter is not None:
            arb = _run(self._arbiter, turn, "arbiter")
            judged.append(arb)
            if arb.ok and arb.scores is not None:
                answered.append(arb.scores.score_map())
        arbitrated = len(judged) == 3
        if len(answered) < 2:
            verdict = failed_verdict(
                turn,
                judged,
                PANEL_INSUFFICIENT,
                weight_profile=self._profile,
                judge_config_hash=self._hash,
                arbitrated=arbitrated,
                arbitration_trigger=failed.trigger,
            )
            return verdict, failed, None
        final = arbitration.combine_arbitrated(answered)
        verdict = self._scored(turn, final, judged, trigger=failed.trigger, arbitrated=arbitrated)
        return verdict, failed, None

    def _scored(
        self,
        turn: TurnEvent,
        final: Mapping[str, float],
        judgments: Sequence[Judgment],
        *,
        trigger: str | None = None,
        arbitrated: bool = False,
    ) -> Verdict:
        return scored_verdict(
            turn,
            final,
            judgments,
            weights=self._weights,
            weight_profile=self._profile,
            critical=self._critical,
            judge_config_hash=self._hash,
            arbitrated=arbitrated,
            arbitration_trigger=trigger,
        )

    def _notify(
        self,
        turn: TurnEvent,
        verdict: Verdict,
        disagreement: arbitration.Disagreement,
        side: arbitration.Side | None,
    ) -> None:
        if self.on_result is None:
            return
        cost = {"primary": 0.0, "arbiter": 0.0}
        for j in verdict.judgments:
            cost[j.role if j.role == "arbiter" else "primary"] += j.cost_usd
        outcome = PanelOutcome(
            assistant=turn.assistant.name,
            status=verdict.status,
            disagreed=disagreement.disagree,
            disagreement_metrics=disagreement.metrics,
            arbitrated=verdict.arbitrated,
            trigger=disagreement.trigger,
            sided_with=side,
            cost_by_role=cost,
        )
        try:
            self.on_result(outcome)
        except Exception:
            # A broken counter must not lose a verdict that is already decided.
            _log.exception("panel_observer_failed", assistant=turn.assistant.name)


def _run(judge: Judge, turn: TurnEvent, role: JudgeRole) -> Judgment:
    """Call a judge; label its Judgment with the configured name and the panel role.

    Judges return failures rather than raise; an exception here is a bug in a judge, recorded
    as an ``internal`` failure so the other judges' work is not lost.
    """
    try:
        judgment = judge.judge(turn)
    except Exception as exc:
        _log.exception("judge_raised", judge=judge.name, role=role)
        return Judgment(
            judge=judge.name,
            kind="unknown",
            model="",
            role=role,
            status="judge_failed",
            failure_reason="internal",
            failure_detail=type(exc).__name__,
            attempts=1,
        )
    if judgment.judge != judge.name or judgment.role != role:
        judgment = judgment.model_copy(update={"judge": judge.name, "role": role})
    return judgment
