"""The ``rubric`` job: grade recently stored live answers against their rubric entry (Pencils Down).

Why a scheduled job and not a pipeline step: rubric grading costs up to 10 calls per answer
passage, is not needed to commit an offset, and must run on one replica (each turn graded
once); as a job it reads the turns every replica stored, never delays the stream or its
commits, and a slow or failing grader cannot pause partitions. The cost is latency: a turn is
graded within ``rubric.interval_seconds`` of being stored, which is fine for a coverage trend.

Each run walks stored turns of the last ``lookback_hours`` not yet graded under this grader
configuration, oldest first (an in-memory cursor skips the unmatched ones already seen, but only
past turns stored a minute ago, so a turn another replica commits late is not skipped), and
for each turn matching a rubric entry (``RubricMatcher``):

- reserves ``passages x questions`` calls from the daemon's hourly budget (the sampler's
  buckets: the same cap as turn judging); a refusal ends the run (``outcome=budget``) and the
  turn is retried next run;
- grades the answer (``RubricGrader.grade_answer``), stores the grades with the extracted
  answers (``rubric_gradings``), observes ``casewatch_rubric_coverage{assistant}`` and counts
  ``casewatch_rubric_graded_total{assistant,outcome=ok}``;
- on a grading failure counts ``outcome=failed``; a transient or auth failure ends the run
  without storing (the endpoint is down or misconfigured: retried next run), any other failure
  (bad request, internal) is stored as a ``failed`` row so one bad turn cannot block the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from pydantic import ValidationError

from monitor.config.judges import JudgeConfig
from monitor.config.rubric import RubricConfig
from monitor.errors import ConfigError, RubricGradingFailed
from monitor.jobs.recorders import RubricRecorder
from monitor.judging.passages import split_passages
from monitor.judging.rubric_grader import RubricGrader, TextGrading
from monitor.judging.rubric_match import RubricMatcher
from monitor.judging.rubric_prompt import PARSE_PATHS
from monitor.judging.rubric_set import RubricEntry, RubricSet
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import Clock, SystemClock
from monitor.sampling.budget import Budget
from monitor.schema.turn import TurnEvent
from monitor.storage.rubric_gradings import RubricGradings
from monitor.storage.store import Store

log = structlog.get_logger(__name__)

_PAGE = 200
SETTLE_SECONDS = 60.0
# Failures that say "the endpoint, not this turn": stop and retry the turn next run.
_RETRY_LATER = frozenset({"timeout", "connection", "rate_limited", "server_error", "auth"})


@dataclass
class RubricRunSummary:
    graded: int = 0
    failed: int = 0
    budget_refused: int = 0
    unmatched: int = 0


class RubricJob:
    name = "rubric"

    def __init__(
        self,
        config: RubricConfig,
        judge_name: str,
        judge_config: JudgeConfig,
        store: Store,
        metrics: Metrics,
        budget: Budget,
        *,
        rubrics: RubricSet,
        clock: Clock | None = None,
    ) -> None:
        """``rubrics``: the set of ``config.rubric_file``, read and checked at the entrypoint
        (``jobs/inputs.rubric_set``); the job reads no file."""
        if judge_config.kind != "openai":
            raise ConfigError(
                f"rubric.judge {judge_name!r} must be an 'openai' judge (an endpoint)"
            )
        self.interval_seconds = config.interval_seconds
        self._config = config
        self._judge_name = judge_name
        self._judge_config = judge_config
        self._gradings = RubricGradings(store)
        self._metrics = RubricRecorder(metrics)
        self._budget = budget
        self._clock = clock or SystemClock()
        self._matcher = RubricMatcher(
            rubrics,
            label=config.label,
            match_case_subject=config.match_case_subject,
            match_query=config.match_query,
        )
        self._grader: RubricGrader | None = None
        self._cursor: tuple[datetime, str] | None = None
        if rubrics.unreviewed:
            log.warning(
                "rubric.unreviewed_entries",
                entries=rubrics.unreviewed,
                detail="live answers are graded on questions no person has checked",
            )

    def _get_grader(self) -> RubricGrader:
        if self._grader is None:
            self._grader = RubricGrader(
                self._judge_name,
                self._judge_config,
                concurrency=self._config.concurrency,
                max_passage_tokens=self._config.max_passage_tokens,
                clock=self._clock,
            )
        return self._grader

    def close(self) -> None:
        if self._grader is not None:
            self._grader.close()
            self._grader = None

    def run(self) -> None:
        summary = self.run_once()
        log.info(
            "rubric run",
            graded=summary.graded,
            failed=summary.failed,
            budget_refused=summary.budget_refused,
            unmatched=summary.unmatched,
        )

    def run_once(self) -> RubricRunSummary:
        grader = self._get_grader()
        fingerprint = grader.fingerprint()
        now = datetime.fromtimestamp(self._clock.time(), tz=UTC)
        since = now - timedelta(hours=self._config.lookback_hours)
        # The kept cursor only passes turns stored SETTLE_SECONDS ago: a replica's transaction
        # may commit a turn stamped a little before one already seen, and it must not be skipped.
        settled = now - timedelta(seconds=SETTLE_SECONDS)
        summary = RubricRunSummary()
        page_cursor = self._cursor
        while summary.graded + summary.failed < self._config.max_turns_per_run:
            page = self._gradings.ungraded(fingerprint, since, page_cursor, _PAGE)
            if not page:
                break
            for stored in page:
                if summary.graded + summary.failed >= self._config.max_turns_per_run:
                    return summary
                if not self._visit(grader, stored.event, summary):
                    return summary  # budget or endpoint: the same turn comes first next run
                page_cursor = stored.cursor
                if stored.stored_at <= settled:
                    self._cursor = stored.cursor
        return summary

    def _visit(
        self, grader: RubricGrader, event: dict[str, Any], summary: RubricRunSummary
    ) -> bool:
        """Grade one stored turn if it matches an entry; False when the run must stop."""
        try:
            turn = TurnEvent.model_validate(event)
        except ValidationError:
            log.warning("rubric.unreadable_turn", event_id=str(event.get("event_id")))
            return True
        entry = self._matcher.match(turn)
        if entry is None:
            summary.unmatched += 1
            return True
        return self._grade(grader, turn, entry, summary)

    def _grade(
        self, grader: RubricGrader, turn: TurnEvent, entry: RubricEntry, summary: RubricRunSummary
    ) -> bool:
        """Grade one turn; False when the run must stop before it (budget, endpoint down)."""
        assistant = turn.assistant.name
        calls = len(split_passages(turn.answer, grader.max_passage_tokens)) * len(entry.questions)
        refused = self._budget.reserve(calls)
        if refused is not None:
            summary.budget_refused += 1
            self._metrics.record_rubric_grading(assistant, "budget", None)
            log.info("rubric.budget_refused", reason=refused, calls=calls)
            return False
        # Settled whatever happens: a failed grading gives back what it did not spend.
        spent_requests, spent_usd = calls, 0.0
        try:
            graded = grader.grade_answer(entry, turn.answer)
            spent_requests, spent_usd = graded.requests, graded.cost_usd
        except RubricGradingFailed as exc:
            spent_requests, spent_usd = exc.requests, exc.cost_usd
            summary.failed += 1
            self._metrics.record_rubric_grading(assistant, "failed", None)
            log.warning("rubric.grading_failed", event_id=turn.event_id, reason=exc.reason)
            if exc.reason in _RETRY_LATER:
                return False
            self._gradings.save(self._row(grader, turn, entry, None, exc.reason))
            return True
        finally:
            self._budget.settle(calls, spent_requests, spent_usd)
        coverage = graded.coverage(self._config.covered_grade)
        self._gradings.save(self._row(grader, turn, entry, graded, None))
        summary.graded += 1
        self._metrics.record_rubric_grading(assistant, "ok", coverage, graded.path_counts)
        return True

    def _row(
        self,
        grader: RubricGrader,
        turn: TurnEvent,
        entry: RubricEntry,
        graded: TextGrading | None,
        failure: str | None,
    ) -> dict[str, Any]:
        now = datetime.fromtimestamp(self._clock.time(), tz=UTC)
        return {
            "event_id": turn.event_id,
            "entry_id": entry.id,
            "grader": grader.fingerprint(),
            "assistant_name": turn.assistant.name,
            "status": "ok" if graded is not None else "failed",
            "failure_reason": failure,
            "reviewed": entry.reviewed,
            "coverage": graded.coverage(self._config.covered_grade) if graded else None,
            "covered_grade": self._config.covered_grade,
            "grades": [
                {
                    "question": g.question,
                    "grade": g.grade,
                    "answer": g.answer,
                    "path": g.path,
                    "passage": g.passage,
                }
                for g in graded.grades
            ]
            if graded
            else None,
            "path_counts": graded.path_counts if graded else {p: 0 for p in PARSE_PATHS},
            "passages": graded.passages if graded else 0,
            "requests": graded.requests if graded else 0,
            "input_tokens": graded.input_tokens if graded else 0,
            "output_tokens": graded.output_tokens if graded else 0,
            "cost_usd": graded.cost_usd if graded else 0.0,
            "graded_at": now,
        }


__all__ = ["RubricJob", "RubricRunSummary"]
