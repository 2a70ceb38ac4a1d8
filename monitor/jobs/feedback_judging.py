"""The feedback judging job: an unsampled turn a user gave negative feedback on is judged
once, charged to the hourly judge budget, with the sampling reason ``feedback``.

Unsampled turns are kept for ``outcomes.retained_seconds`` (redacted, at most
``outcomes.max_retained_turns``, pruned here each run) by the pipeline's ``RetainingDone``. Each
run takes the kept turns with joined negative feedback, never judged (no verdict, and not judged
for feedback before), reserves the panel's calls for each from the budget (a refusal ends the
run, counted ``casewatch_turns_skipped_total{reason="budget_calls|budget_usd"}`` and retried next
run), judges, stores the verdict as any verdict, and marks the turn judged. A turn kept as its
Kafka record's place is read back first (``reread``, ``stream/reread.py``): decoded and
redacted then, as the stream's steps would; one whose record cannot be read back for good
(Kafka no longer has it, or it is not that turn) is forgotten and counted
``casewatch_turns_retained_total{outcome="expired|unreadable"}``, never silently; a broker that
does not answer ends the run, and the turn is tried again the next.

Such a verdict is not a draw of the random sample, so it is kept out of the random sample's
rates: it is counted in ``casewatch_feedback_judged_total`` and ``casewatch_turns_sampled_total
{reason="feedback"}``, never in ``casewatch_turns_judged_total`` (the severe share, its burn
rates and alerts), and its row is marked observed, with the kept turn marked judged, in the
transaction that stores it (a read never sees one without the other), so the sequential detectors
(which read only unobserved verdicts) never see it. Judge requests, tokens and cost are counted
as any judge call's.
"""

from __future__ import annotations

from typing import Protocol

import structlog

from monitor.config.outcomes import OutcomesConfig
from monitor.errors import RecordGone, TransportError
from monitor.jobs.recorders import UNREACHED, OutcomeRecorder
from monitor.judging.evaluator import Evaluator, evaluate_guarded
from monitor.judging.recorder import JudgingRecorder
from monitor.sampling.budget import Budget
from monitor.schema.turn import TurnEvent
from monitor.storage.outcomes import OutcomeRecords
from monitor.storage.retained_turns import KeptTurn, RetainedTurns
from monitor.storage.store import Store

log = structlog.get_logger(__name__)

TURNS_PER_RUN = 20


class Reread(Protocol):
    """Reads a turn kept as its record's place back (``RecordGone`` with the reason, or a
    ``TransportError`` when the broker does not answer)."""

    def __call__(self, kept: KeptTurn) -> TurnEvent: ...

    def close(self) -> None: ...


class FeedbackJudgingJob:
    name = "feedback_judging"

    def __init__(
        self,
        config: OutcomesConfig,
        store: Store,
        records: OutcomeRecords,
        kept: RetainedTurns,
        evaluator: Evaluator,
        budget: Budget,
        recorder: OutcomeRecorder,
        judging: JudgingRecorder,
        *,
        calls_per_turn: int = 1,
        reread: Reread | None = None,
    ) -> None:
        self._config = config
        self._store = store
        self._records = records
        self._kept = kept
        self._evaluator = evaluator
        self._budget = budget
        self._recorder = recorder
        self._judging = judging
        self._calls = calls_per_turn
        self._reread = reread
        self._refusing: str | None = None
        self._unreached = False  # the broker did not answer the last read-back
        self.interval_seconds = config.feedback_judging_interval_seconds
        self.judged = 0

    def close(self) -> None:
        self._evaluator.close()
        if self._reread is not None:
            self._reread.close()

    def _turn(self, kept: KeptTurn) -> TurnEvent | None:
        """The kept turn to judge; None when its record cannot be read back (forgotten and
        counted). ``TransportError`` when the broker does not answer."""
        if kept.event:
            return TurnEvent.model_validate_json(kept.event)
        try:
            if self._reread is None:
                raise RecordGone("unreadable", "no Kafka source to read it back from")
            return self._reread(kept)
        except RecordGone as exc:
            self._kept.forget(kept.event_id)
            self._recorder.record_retained(exc.reason, 1)
            log.warning(
                "a turn with negative feedback cannot be read back from Kafka; not judged",
                event_id=kept.event_id,
                reason=exc.reason,
                detail=exc.detail,
            )
            return None

    def run(self) -> None:
        pruned = self._kept.prune(self._config.retained_seconds, self._config.max_retained_turns)
        if pruned:
            log.info("unsampled turns forgotten", pruned=pruned)
        # Turns kept as places a batch at a time are found by the join: joined here too, so a
        # feedback is judged at this run, not after the join job's next.
        joins = self._records.join_pending(self._config.join_window_seconds)
        if joins.joined or joins.expired:
            pending = self._records.pending()
            self._recorder.record_joins(later=joins.joined, expired=joins.expired, pending=pending)
        for kept in self._kept.feedback_to_judge(TURNS_PER_RUN):
            try:
                turn = self._turn(kept)
            except TransportError as exc:
                # Held, not lost: the turn waits for the next run. Counted at every run the
                # broker does not answer, warned once an outage.
                self._recorder.record_retained(UNREACHED, 1)
                if not self._unreached:
                    log.warning(
                        "kept turns not read back from Kafka; tried again each run",
                        error=str(exc),
                    )
                self._unreached = True
                return
            if self._unreached and kept.event == "":
                log.info("kept turns read back from Kafka again")
                self._unreached = False
            if turn is None:
                continue
            refused = self._budget.reserve(self._calls)
            if refused is not None:
                self._recorder.record_feedback_skipped(turn.assistant.name, refused)
                if self._refusing != refused:
                    log.warning(
                        "the hourly judge budget refuses feedback judging; retried next run",
                        reason=refused,
                    )
                self._refusing = refused
                return
            self._refusing = None
            verdict = None
            try:
                verdict = evaluate_guarded(self._evaluator, turn)
            finally:
                judgments = verdict.judgments if verdict is not None else []
                self._budget.settle(
                    self._calls,
                    sum(max(1, j.attempts) for j in judgments),
                    sum(j.cost_usd for j in judgments),
                )
            # The verdict and the turn's mark in one transaction: never seen apart.
            self._kept.save_feedback_verdict(turn, verdict)
            band = str(verdict.turn_band) if verdict.status == "ok" else "judge_failed"
            self._recorder.record_feedback_judged(turn.assistant.name, band)
            for j in verdict.judgments:
                self._judging.record_judge_request(
                    j.judge,
                    ok=j.ok,
                    failure_reason=j.failure_reason,
                    attempts=j.attempts,
                    latency_seconds=j.latency_seconds,
                    input_tokens=j.input_tokens,
                    output_tokens=j.output_tokens,
                    cost_usd=j.cost_usd,
                )
            self.judged += 1
            log.info("turn judged for its negative feedback", event_id=turn.event_id, band=band)
