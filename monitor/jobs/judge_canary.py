"""The judge canary job: a fixed set of labelled turns re-judged on a schedule by every live
judge, so "is it the assistant or the judge?" has an answer when a regression pages.

Each run, for each judge of the live configuration (the panel's primaries and arbiter):

- reserves one judge request per canary turn from the daemon's hourly budget (the sampler's,
  shared with the stream); a refusal skips that judge until the next run (counted as
  ``outcome="budget"``, logged when it starts);
- judges the canary turns one after another, redacted as the stream redacts live turns for the
  judges (``redaction.before_judging``), stopping at the first failure: the run is then
  recorded ``failed`` with the reason, counted (``casewatch_judge_canary_runs_total``), and
  shows no agreement and feeds no detector;
- otherwise records agreement with the human bands, the mean score's shift against the first
  ``baseline_runs`` runs of this judge configuration and canary set, and feeds the run's count
  of severe calls, one observation per run, to its sequential detector
  (``monitor.reports.judge_canary``, ``monitor.stats.run_cusum``): what a run concludes never
  depends on the order of the canary's turns. Exported as
  ``casewatch_judge_canary_{agreement,score_shift,alarm}{judge}``.

The canary set is the file ``judge_canary.file`` (read, checked and redacted at the
entrypoint by ``jobs/inputs.py``, before the daemon opens anything: a bad file stops it, naming
the line) or, without one, the first-labelled turns in the store (``casewatch labels import``),
up to ``max_turns``; fewer than ``min_turns`` there and the run judges nothing, counted as
``outcome="waiting"`` and logged when it starts waiting. The baseline and the detector belong
to one judge configuration hash and one canary set: change either and the canary starts a new
baseline (the configuration change itself is what ``casewatch_judge_config_info`` shows).
Runs and the detector state are stored (``judge_canary_runs``): a restart or a lease moving
elsewhere continues the test. A run's row is made from the previous state and saved in one
transaction, fenced on the job's lease: a replica whose lease lapsed mid-run saves nothing
(``LeaseLost``), so two replicas never continue the detector from the same state.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from monitor.config.judge_canary import JudgeCanaryConfig
from monitor.jobs.inputs import redact_canary_turns
from monitor.jobs.recorders import JudgeCanaryRecorder
from monitor.judging.judge import Judge
from monitor.reports.judge_canary import (
    Baseline,
    CanaryRun,
    CanaryTurn,
    arm,
    calibration_doc,
    calibration_from,
    observe,
    score_run,
)
from monitor.reports.label_files import LABEL_KEYS, consensus
from monitor.runtime.clock import Clock, SystemClock
from monitor.sampling.budget import Budget
from monitor.sampling.judging_redaction import JudgingRedaction
from monitor.schema.turn import Judgment, TurnEvent
from monitor.stats.run_cusum import RunDetector
from monitor.storage import canary_runs as sql
from monitor.storage.leases import Fence
from monitor.storage.store import Store

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class CanaryJudge:
    name: str
    config_hash: str  # monitor.judging.config_hash.single_judge_hash
    judge: Judge


def _set_fingerprint(turns: Sequence[CanaryTurn]) -> str:
    ids = "\n".join(sorted(t.event.event_id for t in turns))
    return hashlib.sha256(ids.encode()).hexdigest()[:12]


class JudgeCanaryJob:
    name = "judge_canary"

    def __init__(
        self,
        config: JudgeCanaryConfig,
        judges: Sequence[CanaryJudge],
        store: Store,
        recorder: JudgeCanaryRecorder,
        budget: Budget,
        *,
        weights: Mapping[str, float],
        critical: Sequence[str],
        live_config_hash: str,
        redaction: JudgingRedaction | None,
        file_turns: Sequence[CanaryTurn] | None = None,
        clock: Clock | None = None,
        lease_owner: str | None = None,
    ) -> None:
        """``redaction``: the daemon's chain's (``TurnDecisions.redaction``, handed on as
        ``JobInputs.canary_redaction``; None: no redaction), so the judges get canary turns
        redacted as they get live ones. ``file_turns``: with
        ``config.file``, its turns as ``jobs/inputs.canary_file_turns`` read them at the
        entrypoint (redacted already); the job reads no file. ``lease_owner``: the
        scheduler's owner id; a run is then saved only while this replica holds the job's lease
        (None: unfenced, for a run outside the scheduler)."""
        if (config.file is None) != (file_turns is None):
            raise ValueError("file_turns are judge_canary.file's turns (canary_file_turns)")
        self._cfg = config
        self._redaction = redaction
        self._lease_owner = lease_owner
        self._judges = list(judges)
        self._store = store
        self._metrics = recorder
        self._budget = budget
        self._weights = dict(weights)
        self._critical = list(critical)
        self._clock = clock or SystemClock()
        self.interval_seconds = config.interval_seconds
        self._file_turns = None if file_turns is None else list(file_turns)
        recorder.record_config(live_config_hash)
        for j in self._judges:
            recorder.prime(j.name)
        self.last_runs: dict[str, CanaryRun] = {}
        self._waiting = False  # logged once while the store has too few labelled turns
        self._budget_refused: set[str] = set()  # judges whose refusal was logged

    def close(self) -> None:
        for j in self._judges:
            j.judge.close()

    def run(self) -> None:
        self.run_once()

    # ------------------------------------------------------------------ one run

    def canary_set(self) -> list[CanaryTurn]:
        """The canary turns, redacted for judging as live turns are."""
        if self._file_turns is not None:
            return self._file_turns
        events, rows = sql.oldest_labelled_turns(self._store, self._cfg.max_turns)
        human = consensus(rows)
        out = []
        for event_id, doc in events.items():
            labels = {k: b for k, b in human.get(event_id, {}).items() if k in LABEL_KEYS}
            if labels:
                out.append(CanaryTurn(TurnEvent.model_validate(doc), labels))
        # Stored turns passed the stream's redaction already; one that no longer does (a
        # smaller redaction.max_chars since) is left out of the set, never sent raw.
        redacted, refused = redact_canary_turns(
            self._redaction, sorted(out, key=lambda t: t.event.event_id)
        )
        for why in refused:
            log.warning("judge canary turn left out: it cannot be redacted", detail=why)
        return redacted

    def run_once(self) -> dict[str, CanaryRun]:
        turns = self.canary_set()
        if len(turns) < self._cfg.min_turns:
            # Counted every run, logged when it starts (each run would repeat it for hours).
            if not self._waiting:
                log.warning(
                    "judge canary waiting for labels: nothing judged until there are enough",
                    labelled_turns=len(turns),
                    needed=self._cfg.min_turns,
                    detail="casewatch labels export / import, or set judge_canary.file",
                )
            self._waiting = True
            for j in self._judges:
                self._metrics.record_skipped(j.name, "waiting")
            return {}
        self._waiting = False
        fingerprint = _set_fingerprint(turns)
        done: dict[str, CanaryRun] = {}
        for j in self._judges:
            refused = self._budget.reserve(len(turns))
            if refused is not None:
                if j.name not in self._budget_refused:
                    log.warning(
                        "judge canary skipped: the hourly judge budget refused its calls",
                        judge=j.name,
                        reason=refused,
                        calls=len(turns),
                        detail="sampling.budget_calls_per_hour / budget_usd_per_hour",
                    )
                self._budget_refused.add(j.name)
                self._metrics.record_skipped(j.name, "budget")
                continue
            self._budget_refused.discard(j.name)
            judgments: list[Judgment] = []
            try:
                for turn in turns:
                    judgment = j.judge.judge(turn.event)
                    judgments.append(judgment)
                    if not judgment.ok:
                        break
            finally:
                self._budget.settle(
                    len(turns),
                    sum(max(1, x.attempts) for x in judgments),
                    sum(x.cost_usd for x in judgments),
                )
            if judgments and not judgments[-1].ok:
                j_failed = judgments[-1]
                run = CanaryRun(
                    "failed", j_failed.failure_reason or "internal", len(turns), None, None, ()
                )
            else:
                run = score_run(turns, judgments, weights=self._weights, critical=self._critical)
            key = hashlib.sha256(f"{j.config_hash}:{fingerprint}".encode()).hexdigest()[:16]
            self._record(j.name, key, fingerprint, run, len(turns))
            done[j.name] = run
        self.last_runs = done
        return done

    def _record(
        self, judge: str, key: str, fingerprint: str, run: CanaryRun, turns_per_run: int
    ) -> None:
        now = datetime.fromtimestamp(self._clock.time(), tz=UTC)
        fence = None
        if self._lease_owner is not None:  # the lease as it is now, not at the run's start
            fence = Fence(self.name, self._lease_owner, now)
        outcome: dict[str, Any] = {}
        if run.status == "ok":
            # Made once outside the write first: a new baseline's thresholds take seconds to
            # compute (cached after), and SQLite's write lock must not wait for them.
            early = sql.read_history(self._store, judge, key, self._cfg.baseline_runs)
            self._row(judge, key, fingerprint, run, turns_per_run, now, early, {})

        def make_row(history: sql.History) -> dict[str, Any]:
            return self._row(judge, key, fingerprint, run, turns_per_run, now, history, outcome)

        row = sql.record_run(
            self._store, judge, key, self._cfg.baseline_runs, make_row, fence=fence
        )
        # Logged and exported once the row is saved: a run refused by the fence says nothing.
        if run.status != "ok":
            log.warning("judge canary run failed", judge=judge, reason=run.failure_reason)
            self._metrics.record_failed(judge)
            return
        if outcome.get("raised"):
            log.warning(
                "judge canary alarm: the judge calls more canary turns severe",
                judge=judge,
                baseline_severe_rate=outcome["baseline_severe_rate"],
                severe_calls=run.severe_calls,
                turns=run.turns,
            )
        self._metrics.record_ok(
            judge, agreement=run.agreement, score_shift=row["score_shift"], alarm=row["alarm"]
        )

    def _row(
        self,
        judge: str,
        key: str,
        fingerprint: str,
        run: CanaryRun,
        turns_per_run: int,
        now: datetime,
        history: sql.History,
        outcome: dict[str, Any],
    ) -> dict[str, Any]:
        """The run's row from the configuration's history (inside the saving transaction)."""
        previous = history.newest
        state: dict[str, Any] = dict(previous["state"]) if previous else {"canary_set": fingerprint}
        row: dict[str, Any] = {
            "judge": judge,
            "config_hash": key,
            "run_at": now,
            "status": run.status,
            "failure_reason": run.failure_reason,
            "turns": run.turns,
            "agreement": run.agreement,
            "mean_score": run.mean_score,
            "severe_calls": run.severe_calls if run.status == "ok" else None,
        }
        if run.status != "ok":
            return row | {
                "score_shift": None,
                "armed": bool(previous and previous["armed"]),
                "alarm": bool(previous and previous["alarm"]),
                "statistic": previous["statistic"] if previous else 0.0,
                "state": state,
            }
        first = list(history.first)
        baseline_rows = [*first, row][: self._cfg.baseline_runs]
        baseline = Baseline(
            len(baseline_rows),
            sum(float(r["mean_score"]) for r in baseline_rows) / len(baseline_rows),
            sum(int(r["severe_calls"]) for r in baseline_rows),
            sum(int(r["turns"]) for r in baseline_rows),
        )
        shift = None if run.mean_score is None else run.mean_score - baseline.mean_score
        shifts = tuple(self._cfg.shifts)
        detector = RunDetector.from_dict(shifts, state.get("detector"))
        cal = calibration_from(state.get("calibration"), turns_per_run)
        armed = len(first) >= self._cfg.baseline_runs  # this run comes after the baseline
        statistic = 0.0
        if armed:
            if cal is None or len(cal.thresholds) != len(shifts):
                cal = arm(
                    baseline,
                    shifts,
                    false_alarm_days=self._cfg.false_alarm_days,
                    turns_per_run=turns_per_run,
                    interval_seconds=self._cfg.interval_seconds,
                    judges=len(self._judges),
                )
            outcome["raised"] = observe(detector, cal, run, now.timestamp())
            outcome["baseline_severe_rate"] = baseline.severe_rate
            statistic = detector.statistic(cal)
        state = {
            "canary_set": fingerprint,
            "baseline": {
                "runs": baseline.runs,
                "mean_score": baseline.mean_score,
                "severe_rate": baseline.severe_rate,
            },
            "calibration": None if cal is None else calibration_doc(cal, turns_per_run),
            "detector": detector.to_dict(),
        }
        return row | {
            "score_shift": shift,
            "armed": armed,
            "alarm": detector.latched is not None,
            "statistic": statistic,
            "state": state,
        }
