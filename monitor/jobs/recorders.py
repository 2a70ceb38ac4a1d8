"""What the scheduled jobs record: their runs, drift, rubric grading and the baseline tiers
(the families are declared in ``monitor.metrics.exporter``). Each job builds its recorder from the
``Metrics`` it is given; the baseline-tier job's judge requests go through judging's recorder.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from prometheus_client import Gauge

from monitor.judging.pairwise_scoring import KINDS, OUTCOMES
from monitor.judging.probes import TIERS
from monitor.judging.recorder import JudgingRecorder
from monitor.metrics.exporter import FAILURE_MODE_RANKS, SINCE_CHANGE_RANKS, Metrics

# Outcomes of grading one live turn against its rubric entry (rubric job).
RUBRIC_OUTCOMES: tuple[str, ...] = ("ok", "failed", "budget")


class JobRunRecorder:
    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics

    def record_job_run(self, job: str, outcome: str, finished_at: float) -> None:
        self._m.job_runs.labels(job=job, outcome=outcome).inc()
        if outcome == "ok":
            self._m.job_last_success.labels(job=job).set(finished_at)


class DriftRecorder:
    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics
        self._assistant = metrics.assistant_label
        self._series: dict[str, set[str]] = {}  # assistant label -> signals exported
        self._lock = threading.Lock()

    def record_drift_signal(
        self,
        assistant: str,
        signal: str,
        *,
        q_value: float | None,
        effect: float | None,
        detected: bool,
    ) -> None:
        """One signal of the last drift run; None (insufficient data) is exported as NaN."""
        label = self._assistant(assistant)
        with self._lock:
            self._series.setdefault(label, set()).add(signal)
        nan = float("nan")
        self._m.drift_pvalue.labels(label, signal).set(nan if q_value is None else q_value)
        self._m.drift_effect.labels(label, signal).set(nan if effect is None else effect)
        self._m.drift_detected.labels(label, signal).set(1 if detected else 0)

    def record_drift_windows(self, assistant: str, *, recent: int, reference: int) -> None:
        label = self._assistant(assistant)
        self._m.drift_window_turns.labels(label, "recent").set(recent)
        self._m.drift_window_turns.labels(label, "reference").set(reference)

    def record_drift_run(self, finished_at: float) -> None:
        self._m.drift_last_run.set(finished_at)

    def forget_drift(self, assistant: str) -> None:
        """Drop an assistant's drift series (it left both windows): no frozen last values."""
        label = self._assistant(assistant)
        with self._lock:
            signals = self._series.pop(label, set())
        m = self._m
        for signal in signals:
            for gauge in (m.drift_pvalue, m.drift_effect, m.drift_detected):
                with contextlib.suppress(KeyError):
                    gauge.remove(label, signal)
        for window in ("recent", "reference"):
            with contextlib.suppress(KeyError):
                m.drift_window_turns.remove(label, window)


class RubricRecorder:
    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics
        self._assistant = metrics.assistant_label

    def record_rubric_grading(
        self,
        assistant: str,
        outcome: str,
        coverage: float | None,
        paths: Mapping[str, int] | None = None,
    ) -> None:
        """One live turn graded against its rubric entry (``coverage`` and the replies' parse
        ``paths`` when ``ok``)."""
        label = self._assistant(assistant)
        self._m.rubric_graded.labels(assistant=label, outcome=outcome).inc()
        if coverage is not None:
            self._m.rubric_coverage.labels(assistant=label).observe(coverage)
        for path, n in (paths or {}).items():
            if n:
                self._m.rubric_replies.labels(path=path).inc(n)


class FailureModeRecorder:
    """Each assistant's failure modes of the newest run: the largest by rank (no mode id in a
    label), how many there are and how many emerge, and where the window's turns went."""

    OUTCOMES: tuple[str, ...] = ("grouped", "too_few_turns")
    WINDOW: tuple[str, ...] = ("grouped", "unsorted", "over_cap")
    FALLBACKS: tuple[str, ...] = ("down", "timeout", "error", "malformed", "over_cap")

    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics
        self._assistant = metrics.assistant_label

    def embeddings_configured(self) -> None:
        """Every fallback reason exported at 0, so increase() sees the first one."""
        for reason in self.FALLBACKS:
            self._m.failure_mode_embedding_fallback.labels(reason)

    def record_fallback(self, reason: str) -> None:
        self._m.failure_mode_embedding_fallback.labels(reason).inc()

    def record_run(
        self,
        assistant: str,
        *,
        unit: str = "turn",
        outcome: str,
        sizes: Iterable[int],
        emerging: int,
        grouped: int,
        unsorted: int,
        over_cap: int,
    ) -> None:
        label = self._assistant(assistant)
        m = self._m
        for o in self.OUTCOMES:  # both outcomes exported from the first run: increase() sees 1
            m.failure_mode_runs.labels(label, unit, o)
        m.failure_mode_runs.labels(label, unit, outcome).inc()
        ranked = sorted(sizes, reverse=True)
        m.failure_modes.labels(label, unit).set(len(ranked))
        m.failure_modes_emerging.labels(label, unit).set(emerging)
        for rank in range(1, FAILURE_MODE_RANKS + 1):
            size = ranked[rank - 1] if rank <= len(ranked) else 0
            m.failure_mode_turns.labels(label, unit, str(rank)).set(size)
        for window, n in zip(self.WINDOW, (grouped, unsorted, over_cap), strict=True):
            m.failure_mode_window_turns.labels(label, unit, window).set(n)

    def forget(self, assistant: str, unit: str = "turn") -> None:
        """An assistant with no failed turn (or case) in the window any more: no frozen last
        values."""
        label = self._assistant(assistant)
        m = self._m
        for gauge in (m.failure_modes, m.failure_modes_emerging):
            with contextlib.suppress(KeyError):
                gauge.remove(label, unit)
        for rank in range(1, FAILURE_MODE_RANKS + 1):
            with contextlib.suppress(KeyError):
                m.failure_mode_turns.remove(label, unit, str(rank))
        for window in self.WINDOW:
            with contextlib.suppress(KeyError):
                m.failure_mode_window_turns.remove(label, unit, window)


class DetectionRecorder:
    """The sequential detectors' gauges; ``rate_since`` and ``change_point`` exist only while
    a detector holds an alarm, so a stale change point never outlives its regression."""

    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics
        self._assistant = metrics.assistant_label

    def record_left_out(self, assistant: str, count: int, reason: str) -> None:
        """Judged turns the detectors could not observe, by reason (``monitor.jobs.detection``:
        no cheap-look cell stored, a cell without a baseline, a cascade draw under the
        uniform strategy)."""
        self._m.detector_left_out.labels(self._assistant(assistant), reason).inc(count)

    def record(
        self,
        assistant: str,
        signal: str,
        *,
        armed: bool,
        statistic: float,
        alarm: bool,
        baseline_rate: float | None,
        rate_since: float | None,
        change_point: float | None,
    ) -> None:
        m, label = self._m, self._assistant(assistant)
        m.detector_armed.labels(label, signal).set(1 if armed else 0)
        m.detector_statistic.labels(label, signal).set(statistic if armed else 0.0)
        m.detector_alarm.labels(label, signal).set(1 if alarm and armed else 0)
        m.detector_baseline_rate.labels(label, signal).set(
            float("nan") if baseline_rate is None else baseline_rate
        )
        for gauge, value in (
            (m.detector_rate_since, rate_since),
            (m.detector_change_point, change_point),
        ):
            if alarm and value is not None:
                gauge.labels(label, signal).set(value)
            else:
                with contextlib.suppress(KeyError):
                    gauge.remove(label, signal)

    def record_run(self, finished_at: float) -> None:
        self._m.detector_last_run.set(finished_at)

    def record_modes_since(
        self, assistant: str, signal: str, modes: Sequence[tuple[int, float]]
    ) -> None:
        """The largest failure modes since an alarmed detector's change point: each mode's
        number and share, largest first; the ranks past them are removed."""
        m, label = self._m, self._assistant(assistant)
        for rank in range(1, SINCE_CHANGE_RANKS + 1):
            if rank <= len(modes):
                number, share = modes[rank - 1]
                m.failure_mode_since_change_id.labels(label, signal, str(rank)).set(number)
                m.failure_mode_since_change_share.labels(label, signal, str(rank)).set(share)
            else:
                self._remove_rank(label, signal, rank)

    def forget_modes_since(self, assistant: str, signal: str) -> None:
        """The detector reset (or there is no grouping to read): no modes named any more."""
        label = self._assistant(assistant)
        for rank in range(1, SINCE_CHANGE_RANKS + 1):
            self._remove_rank(label, signal, rank)

    def _remove_rank(self, label: str, signal: str, rank: int) -> None:
        m = self._m
        for gauge in (m.failure_mode_since_change_id, m.failure_mode_since_change_share):
            with contextlib.suppress(KeyError):
                gauge.remove(label, signal, str(rank))


class QualityEstimateRecorder:
    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics
        self._assistant = metrics.assistant_label

    def record_quality_estimate(
        self, assistant: str, signal: str, point: float, lower: float, upper: float
    ) -> None:
        label = self._assistant(assistant)
        for bound, value in (("point", point), ("lower", lower), ("upper", upper)):
            self._m.quality_estimate.labels(label, signal, bound).set(value)


class QualityEstimateAnytimeRecorder:
    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics
        self._assistant = metrics.assistant_label

    def record_anytime(
        self, assistant: str, signal: str, point: float, lower: float, upper: float
    ) -> None:
        label = self._assistant(assistant)
        for bound, value in (("point", point), ("lower", lower), ("upper", upper)):
            self._m.quality_estimate_anytime.labels(label, signal, bound).set(value)


class JudgeCanaryRecorder:
    """The canary's gauges per judge; agreement and shift keep the last successful run's
    values (a failed run is counted, never shown as agreement)."""

    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics

    def record_config(self, config_hash: str) -> None:
        self._m.judge_config_info.labels(config_hash=config_hash).set(1)

    def prime(self, judge: str) -> None:
        for outcome in ("ok", "failed", "budget", "waiting"):
            self._m.judge_canary_runs.labels(judge=judge, outcome=outcome)
        self._m.judge_canary_alarm.labels(judge=judge).set(0)

    def record_failed(self, judge: str) -> None:
        self._m.judge_canary_runs.labels(judge=judge, outcome="failed").inc()

    def record_skipped(self, judge: str, outcome: str) -> None:
        """A run that judged nothing: ``budget`` (the hourly budget refused its calls) or
        ``waiting`` (fewer labelled turns in the store than ``min_turns``)."""
        self._m.judge_canary_runs.labels(judge=judge, outcome=outcome).inc()

    def record_ok(
        self, judge: str, *, agreement: float | None, score_shift: float | None, alarm: bool
    ) -> None:
        m = self._m
        m.judge_canary_runs.labels(judge=judge, outcome="ok").inc()
        nan = float("nan")
        m.judge_canary_agreement.labels(judge=judge).set(nan if agreement is None else agreement)
        m.judge_canary_score_shift.labels(judge=judge).set(
            nan if score_shift is None else score_shift
        )
        m.judge_canary_alarm.labels(judge=judge).set(1 if alarm else 0)


class PairwiseRequest(Protocol):
    """What ``BaselineRecorder.record_judge_requests`` reads of a ``PairwiseJudgment``."""

    @property
    def ok(self) -> bool: ...

    @property
    def failure_reason(self) -> str | None: ...

    @property
    def cost_usd(self) -> float: ...


class BaselineRecorder:
    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics
        self._assistant = metrics.assistant_label
        self._judging = JudgingRecorder(metrics)

    def prime(self, assistant: str) -> None:
        """Zero series for every tier, outcome and confidence kind of a configured assistant."""
        label = self._assistant(assistant)
        for tier in TIERS:
            for outcome in OUTCOMES:
                self._m.baseline_outcomes.labels(assistant=label, tier=tier, outcome=outcome)
        for kind in KINDS:
            self._m.pairwise_confidence.labels(assistant=label, kind=kind)

    def record_assistant(
        self,
        assistant: str,
        *,
        outcomes: Mapping[str, Mapping[str, int]],
        win_rates: Mapping[str, float | None],
        kinds: Mapping[str, int],
        position_disagreement: float | None,
        elo: float | None,
    ) -> None:
        """One run's results for ``assistant``: ``outcomes`` and ``win_rates`` per tier,
        decisions per confidence kind. A value of None (nothing judged this run) removes its
        gauge rather than leave the last run's value standing as if it were current."""
        m = self._m
        label = self._assistant(assistant)
        for tier, counts in outcomes.items():
            for outcome in OUTCOMES:
                if counts.get(outcome):
                    m.baseline_outcomes.labels(assistant=label, tier=tier, outcome=outcome).inc(
                        counts[outcome]
                    )
        for tier, rate in win_rates.items():
            _set_or_remove(m.baseline_win_rate, rate, label, tier)
        for kind, count in kinds.items():
            m.pairwise_confidence.labels(assistant=label, kind=kind).inc(count)
        _set_or_remove(m.pairwise_position_disagreement, position_disagreement, label)
        _set_or_remove(m.elo_rating, elo, label)

    def record_judge_requests(self, judge: str, requests: Iterable[PairwiseRequest]) -> None:
        """Each pairwise judgment as one judge request (judging's series)."""
        for r in requests:
            self._judging.record_judge_request(
                judge, ok=r.ok, failure_reason=r.failure_reason, cost_usd=r.cost_usd
            )


class OutcomeRecorder:
    """What the outcome step, ``casewatch outcomes import`` and the outcome join job record:
    the signals on all traffic, what became of each event, joins and judge/user pairs."""

    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics
        self._assistant = metrics.assistant_label

    def prime(self) -> None:
        """Every bounded series at 0 from the start, so increase() sees the first one."""
        for outcome in OUTCOME_EVENT_OUTCOMES:
            self._m.outcome_events.labels(outcome=outcome)
        for outcome in JOIN_OUTCOMES:
            self._m.outcome_joins.labels(outcome=outcome)
        self._m.outcomes_pending.set(0)
        for outcome in RETAINED_OUTCOMES:
            self._m.turns_retained.labels(outcome=outcome)

    def record_outcomes(self, counts: Mapping[tuple[str, str], int], *, joined: int) -> None:
        """Outcome events new to the store, per (assistant, kind) (``kind``: ``SIGNAL_KINDS``),
        ``joined`` of them to their turn or case on arrival."""
        for (assistant, kind), count in counts.items():
            self._m.outcomes.labels(assistant=self._assistant(assistant), kind=kind).inc(count)
        total = sum(counts.values())
        if total:
            self._m.outcome_events.labels(outcome="inserted").inc(total)
        if joined:
            self._m.outcome_joins.labels(outcome="on_arrival").inc(joined)

    def record_duplicates(self, count: int) -> None:
        if count:
            self._m.outcome_events.labels(outcome="duplicate").inc(count)

    def record_comment_dropped(self) -> None:
        self._m.outcome_events.labels(outcome="comment_dropped").inc()

    def record_joins(self, *, later: int, expired: int, pending: int) -> None:
        if later:
            self._m.outcome_joins.labels(outcome="later").inc(later)
        if expired:
            self._m.outcome_joins.labels(outcome="expired").inc(expired)
        self._m.outcomes_pending.set(pending)

    def record_retained(self, outcome: str, count: int) -> None:
        if count:
            self._m.turns_retained.labels(outcome=outcome).inc(count)

    def record_feedback_judged(self, assistant: str, band: str) -> None:
        """One turn judged for its feedback: its sampling reason and band (never in the
        random sample's casewatch_turns_judged_total)."""
        label = self._assistant(assistant)
        self._m.turns_sampled.labels(assistant=label, reason="feedback").inc()
        self._m.feedback_judged.labels(assistant=label, band=band).inc()

    def record_feedback_skipped(self, assistant: str, reason: str) -> None:
        self._m.turns_skipped.labels(assistant=self._assistant(assistant), reason=reason).inc()

    def record_pair(self, assistant: str, agreement: str) -> None:
        self._m.judge_user_pairs.labels(
            assistant=self._assistant(assistant), agreement=agreement
        ).inc()


# casewatch_outcome_events_total{outcome} and casewatch_outcome_joins_total{outcome}.
OUTCOME_EVENT_OUTCOMES: tuple[str, ...] = ("inserted", "duplicate", "comment_dropped")
JOIN_OUTCOMES: tuple[str, ...] = ("on_arrival", "later", "expired")
# ``unreached``: a read-back the broker did not answer; the turn waits for the next run.
UNREACHED = "unreached"
RETAINED_OUTCOMES: tuple[str, ...] = (
    "stored",
    "dropped",
    "failed",
    "expired",
    "unreadable",
    UNREACHED,
)


def _set_or_remove(gauge: Gauge, value: float | None, *labels: str) -> None:
    if value is not None:
        gauge.labels(*labels).set(value)
        return
    with contextlib.suppress(KeyError):
        gauge.remove(*labels)


__all__ = [
    "RUBRIC_OUTCOMES",
    "BaselineRecorder",
    "DriftRecorder",
    "JobRunRecorder",
    "OutcomeRecorder",
    "PairwiseRequest",
    "RubricRecorder",
]


# Reasons a closed case is not judged by a run (casewatch_cases_skipped_total).
CASE_SKIP_REASONS: tuple[str, ...] = ("budget", "duplicate", "lease_lost", "gave_up", "vanished")


class CaseRecorder:
    """The case job's series: verdicts by band, outcome and metric, failures, skips, backlog;
    each case judge's requests also count as judge requests (tokens, cost, latency), like the
    turn judges'."""

    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics
        self._assistant = metrics.assistant_label
        self._judging = JudgingRecorder(metrics)
        for reason in CASE_SKIP_REASONS:  # exported at 0: increase() sees the first
            metrics.cases_skipped.labels(reason=reason)
        metrics.cases_pending.set(0)

    def prime(self, reasons: Iterable[str]) -> None:
        for reason in reasons:
            self._m.case_judge_failed.labels(reason=reason)

    def record_verdict(
        self,
        assistant: str,
        *,
        band: str | None,
        outcome: str | None,
        case_score: float | None,
        metric_bands: Mapping[str, str],
        failure_reason: str | None,
    ) -> None:
        m = self._m
        name = self._assistant(assistant)
        m.cases_judged.labels(assistant=name, band=band or "judge_failed").inc()
        if band is None:
            m.case_judge_failed.labels(reason=failure_reason or "internal").inc()
            return
        if outcome is not None:
            m.case_resolution.labels(assistant=name, outcome=outcome).inc()
        if case_score is not None:
            m.case_score.labels(assistant=name).observe(case_score)
        for metric, metric_band in metric_bands.items():
            m.case_metric_band.labels(assistant=name, metric=metric, band=metric_band).inc()

    def record_judge_request(
        self,
        judge: str,
        *,
        ok: bool,
        failure_reason: str | None,
        attempts: int,
        latency_seconds: float,
        input_tokens: int,
        output_tokens: int,
        cost_usd: float,
    ) -> None:
        self._judging.record_judge_request(
            judge,
            ok=ok,
            failure_reason=failure_reason,
            attempts=attempts,
            latency_seconds=latency_seconds,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=cost_usd,
        )

    def record_skipped(self, reason: str, count: int = 1) -> None:
        self._m.cases_skipped.labels(reason=reason).inc(count)

    def record_pending(self, pending: int) -> None:
        self._m.cases_pending.set(pending)


class ReviewQueueRecorder:
    """The review queue's counters and its backlog (jobs/review_queue.py)."""

    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics

    def queued(self, reason: str, count: int) -> None:
        if count:
            self._m.review_tasks_queued.labels(reason=reason).inc(count)

    def pushed(self, reason: str) -> None:
        self._m.review_tasks_pushed.labels(reason=reason).inc()

    def failed(self, stage: str, reason: str) -> None:
        self._m.review_failures.labels(stage=stage, reason=reason).inc()

    def annotation(self, outcome: str) -> None:
        self._m.review_annotations.labels(outcome=outcome).inc()

    def backlog(self, size: int) -> None:
        self._m.review_backlog.set(size)

    def agreement(self, assistant: str, signal: str, share: float) -> None:
        label = self._m.assistant_label(assistant)
        self._m.review_agreement.labels(label, signal).set(share)
