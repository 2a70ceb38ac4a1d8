"""The case job: each sampled conversation judged as a whole once it goes quiet.

Each run, on the job's lease like every scheduled job:

1. asks the store which cases are due (``storage/case_queries.due_cases``: no open
   conversation is held in memory, a million of them are rows): quiet for
   ``cases.idle_seconds``, or a turn said ``ends_case``, or a ``judge_failed`` verdict to
   retry; the longest quiet first, ``max_cases_per_run`` at most. Only conversations with a
   stored turn are cases, and the store holds the turns the stream judged: cases of sampled
   conversations are judged, no other;
2. for each, reads its turns (conversation order), reserves the panel's calls from the
   daemon's hourly judge budget (a refusal stops the run: counted ``budget``, logged once
   until the budget admits a case again), judges it with the live panel's case judges
   (``judging/case_panel.py``) and settles what was spent;
3. writes the verdict as the version the case had when found due, in one transaction fenced on
   the job's lease, the unique (assistant, conversation, version) constraint as the last line:
   a version written by another run is counted ``duplicate`` and not exported twice; a lost
   lease stops the run (``LeaseLost``, counted ``lease_lost``) with nothing saved. A SIGKILL
   between the judge call and the write leaves the case due: it is judged again, and stored
   once;
4. sets the backlog gauge to the cases still due.

A case that resumes after its verdict (a turn stored later) is due again and judged as the
next version; the earlier verdicts stay, the newest is current. A failed judge writes a
``judge_failed`` version with the reason; the case is retried at the next run, up to
``max_failures`` failures in a row (then counted ``gave_up`` and left until a new turn comes).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import structlog

from monitor.config.cases import CasesConfig
from monitor.errors import LeaseLost
from monitor.jobs.recorders import CaseRecorder
from monitor.judging.case_panel import CasePanel, CaseResult
from monitor.judging.judge import FAILURE_REASONS
from monitor.runtime.clock import Clock, SystemClock
from monitor.sampling.budget import Budget
from monitor.schema.case import CaseVerdict
from monitor.scoring import case as case_scoring
from monitor.storage import case_queries as sql
from monitor.storage.leases import Fence
from monitor.storage.store import Store

log = structlog.get_logger(__name__)


class CaseJob:
    name = "cases"

    def __init__(
        self,
        config: CasesConfig,
        panel: CasePanel,
        config_hash: str,
        store: Store,
        recorder: CaseRecorder,
        budget: Budget,
        *,
        clock: Clock | None = None,
        lease_owner: str | None = None,
    ) -> None:
        """``lease_owner``: the scheduler's owner id; verdicts are then written only while
        this replica holds the job's lease (None: unfenced, for a run outside the scheduler;
        the unique constraint still refuses a second write of a version)."""
        self._cfg = config
        self._panel = panel
        self._hash = config_hash
        self._store = store
        self._metrics = recorder
        self._budget = budget
        self._clock = clock or SystemClock()
        self._lease_owner = lease_owner
        self.interval_seconds = config.interval_seconds
        self._budget_refused = False  # logged once until a case is admitted again
        recorder.prime([*FAILURE_REASONS, "panel_insufficient"])

    def close(self) -> None:
        self._panel.close()

    def run(self) -> None:
        self.run_once()

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock.time(), tz=UTC)

    def _due(self, limit: int) -> list[sql.DueCase]:
        now = self._now()
        return sql.due_cases(
            self._store,
            now=now,
            idle_cutoff=now - timedelta(seconds=self._cfg.idle_seconds),
            since=now - timedelta(seconds=self._cfg.lookback_seconds),
            max_failures=self._cfg.max_failures,
            limit=limit,
        )

    def run_once(self) -> list[CaseVerdict]:
        """Judge the due cases; returns the verdicts this run stored."""
        stored: list[CaseVerdict] = []
        for due in self._due(self._cfg.max_cases_per_run):
            if not self._admitted():
                break
            verdict = self._judge(due)
            if verdict is not None and self._save(verdict):
                stored.append(verdict)
        self._metrics.record_pending(len(self._due(self._cfg.max_cases_per_run)))
        return stored

    def _admitted(self) -> bool:
        refused = self._budget.reserve(self._panel.max_calls)
        if refused is None:
            self._budget_refused = False
            return True
        if not self._budget_refused:
            log.warning(
                "case judging paused: the hourly judge budget refused a case's calls",
                reason=refused,
                calls=self._panel.max_calls,
                detail="cases wait (casewatch_cases_pending); sampling.budget_calls_per_hour "
                "/ budget_usd_per_hour",
            )
        self._budget_refused = True
        self._metrics.record_skipped("budget")
        return False

    def _judge(self, due: sql.DueCase) -> CaseVerdict | None:
        """The case's verdict (its reservation settled), or None when its turns are gone."""
        calls = self._panel.max_calls
        try:
            stored = sql.read_case(self._store, due.assistant, due.conversation_id)
        except BaseException:
            self._budget.settle(calls, 0, 0.0)
            raise
        if stored is None:
            self._budget.settle(calls, 0, 0.0)
            self._metrics.record_skipped("vanished")
            return None
        result: CaseResult | None = None
        try:
            result = self._panel.judge(stored.case)
        finally:
            judgments = result.judgments if result is not None else ()
            self._budget.settle(
                calls,
                sum(max(1, j.attempts) for j in judgments),
                sum(j.cost_usd for j in judgments),
            )
        for j in result.judgments:
            self._metrics.record_judge_request(
                j.judge,
                ok=j.ok,
                failure_reason=j.failure_reason,
                attempts=j.attempts,
                latency_seconds=j.latency_seconds,
                input_tokens=j.input_tokens,
                output_tokens=j.output_tokens,
                cost_usd=j.cost_usd,
            )
        ok = result.status == "ok"
        scores = result.scores
        outcome = result.outcome
        return CaseVerdict(
            conversation_id=due.conversation_id,
            version=due.version,
            assistant=due.assistant,
            status="ok" if ok else "judge_failed",
            close_reason="ended" if due.close_reason == "ended" else "idle",
            turns=stored.total_turns,
            turns_cut=result.turns_cut,
            covered_until=stored.covered_until,
            judge_config_hash=self._hash,
            failure_reason=result.failure_reason,
            failures_in_row=0 if ok else due.failures_in_row + 1,
            case_score=case_scoring.case_score(scores) if ok else None,
            case_band=case_scoring.case_band(scores, outcome) if ok and outcome else None,
            resolution_outcome=outcome,
            metric_scores=dict(scores),
            metric_bands=case_scoring.metric_bands(scores) if ok else {},
            turn_mean_s_final=case_scoring.turn_mean(stored.turn_s_finals),
            judgments=result.judgments,
            arbitrated=result.arbitrated,
            arbitration_trigger=result.trigger,
        )

    def _save(self, verdict: CaseVerdict) -> bool:
        now = self._now()
        fence = Fence(self.name, self._lease_owner, now) if self._lease_owner else None
        try:
            written = sql.save_case_verdict(self._store, verdict, now, fence=fence)
        except LeaseLost:
            self._metrics.record_skipped("lease_lost")
            raise
        if not written:
            log.info(
                "case verdict already written by another run",
                conversation_id=verdict.conversation_id,
                version=verdict.version,
            )
            self._metrics.record_skipped("duplicate")
            return False
        self._metrics.record_verdict(
            verdict.assistant,
            band=str(verdict.case_band) if verdict.case_band else None,
            outcome=verdict.resolution_outcome,
            case_score=verdict.case_score,
            metric_bands={m: str(b) for m, b in verdict.metric_bands.items()},
            failure_reason=verdict.failure_reason,
        )
        if verdict.status != "ok":
            log.warning(
                "case judge failed; retried at the next run",
                conversation_id=verdict.conversation_id,
                version=verdict.version,
                reason=verdict.failure_reason,
                failures_in_row=verdict.failures_in_row,
            )
            if verdict.failures_in_row >= self._cfg.max_failures:
                log.warning(
                    "case judging given up until a new turn arrives",
                    conversation_id=verdict.conversation_id,
                    failures_in_row=verdict.failures_in_row,
                )
                self._metrics.record_skipped("gave_up")
        return True
