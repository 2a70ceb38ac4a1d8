"""Every Prometheus metric casewatch exports, declared in one place.

``rules/`` and ``dashboards/`` refer only to names listed in ``METRIC_NAMES`` (a test checks
it), so a metric is added here, with a comment saying what it answers, never ad hoc elsewhere.

Labels are bounded: assistant, metric, band, judge, topic, partition, reason, outcome, kind —
never conversation or event ids. Assistant names come from the events themselves (untrusted),
so ``LabelGuard`` caps how many distinct values one label may take; later values are exported
as ``__other__`` instead of growing the series count without limit.

Every metric takes the registry it registers into; tests build a fresh ``CollectorRegistry``
and read values back with ``registry.get_sample_value(name, labels)``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)

from monitor import __version__
from monitor.judging.arbitration import PanelOutcome
from monitor.judging.judge import FAILURE_REASONS
from monitor.models import Band, Verdict

# The exported family names (counters with their ``_total``). Histograms also expose
# ``_bucket``, ``_sum`` and ``_count`` series; see ``is_declared``.
METRIC_NAMES: tuple[str, ...] = (
    "casewatch_build_info",
    "casewatch_turns_consumed_total",
    "casewatch_turns_sampled_total",
    "casewatch_turns_skipped_total",
    "casewatch_turns_judged_total",
    "casewatch_metric_band_total",
    "casewatch_score_final",
    "casewatch_metric_score",
    "casewatch_judge_requests_total",
    "casewatch_judge_retries_total",
    "casewatch_judge_failed_total",
    "casewatch_judge_latency_seconds",
    "casewatch_judge_tokens_total",
    "casewatch_judge_cost_usd_total",
    "casewatch_dead_letter_total",
    "casewatch_in_flight",
    "casewatch_paused_partitions",
    "casewatch_consumer_lag",
    "casewatch_offsets_committed_total",
    "casewatch_commit_failures_total",
    "casewatch_stored_total",
    "casewatch_storage_errors_total",
    "casewatch_revoke_abandoned_total",
    "casewatch_panel_turns_total",
    "casewatch_disagreements_total",
    "casewatch_arbiter_calls_total",
    "casewatch_arbitration_outcome_total",
    "casewatch_judge_cost_usd_by_role_total",
    # Scheduled jobs (monitor/jobs/).
    "casewatch_job_runs_total",
    "casewatch_job_last_success_timestamp_seconds",
    # Drift (monitor/jobs/drift.py).
    "casewatch_drift_pvalue",
    "casewatch_drift_effect",
    "casewatch_drift_detected",
    "casewatch_drift_last_run_timestamp_seconds",
    "casewatch_drift_window_turns",
    # Baseline tiers and pairwise ratings (seed 000).
    "casewatch_baseline_win_rate",
    "casewatch_baseline_outcomes_total",
    "casewatch_elo_rating",
    "casewatch_pairwise_confidence_total",
    "casewatch_pairwise_position_disagreement",
    # Rubric grading (seed 001).
    "casewatch_rubric_coverage",
    "casewatch_rubric_graded_total",
    "casewatch_rubric_replies_total",
    # Identifier tripwire (monitor/judging/heuristic/tripwire.py), on every consumed turn.
    "casewatch_tripwire_checked_total",
    "casewatch_identifier_mismatch_total",
    "casewatch_tripwire_truncated_total",
    # Record batches the consumer could not read (issue 24: codec missing, corrupt batch).
    "casewatch_unreadable_batches_total",
    # Rejoins of a consumer group that did not form for several session timeouts (issue 24).
    "casewatch_consumer_group_rejoins_total",
)

HISTOGRAMS: frozenset[str] = frozenset(
    {"casewatch_score_final", "casewatch_metric_score", "casewatch_judge_latency_seconds"}
    | {"casewatch_rubric_coverage"}
)

# Score buckets share the band edges of seed 004 appendix B (0.30 / 0.60 / 0.85), so a
# PromQL histogram_quantile or a bucket ratio reads directly as a band share.
SCORE_BUCKETS: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 1.0)
# Judge calls range from a local heuristic (~ms) to a slow hosted model with retries (minutes).
LATENCY_BUCKETS: tuple[float, ...] = (
    0.01,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    20.0,
    30.0,
    60.0,
    120.0,
)

# Rubric coverage is a share of at most 10 questions: tenths, with 0 as its own bucket.
COVERAGE_BUCKETS: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
# Outcomes of grading one live turn against its rubric entry (rubric job).
RUBRIC_OUTCOMES: tuple[str, ...] = ("ok", "failed", "budget")

# No ``*_created`` samples: Prometheus ignores them in the text format, and at the full label
# set (100 assistants x 8 metrics x bands) they are a fifth of every scrape (bench/scrape.py).
disable_created_metrics()  # type: ignore[no-untyped-call]

OTHER = "__other__"
DEFAULT_MAX_LABEL_VALUES = 100
_MAX_LABEL_CHARS = 64
# Sampling counter children kept per (sampled, assistant, reason): every consumed turn is
# counted, and ``labels()`` costs several microseconds. Bounded, as assistant names are input.
_SAMPLING_CACHE_MAX = 1024
# casewatch_turns_skipped_total reason of a sampled turn whose verdict is already stored.
ALREADY_JUDGED = "already_judged"


class Decision(Protocol):
    """What ``record_sampling`` needs of a ``consumers.sampling.SampleDecision``."""

    @property
    def sampled(self) -> bool: ...

    @property
    def reason(self) -> str: ...


def is_declared(series: str) -> bool:
    """True if ``series`` (a name found in a rule or dashboard query) is exported here."""
    if series in METRIC_NAMES:
        return True
    for suffix in ("_bucket", "_sum", "_count"):
        if series.endswith(suffix) and series[: -len(suffix)] in HISTOGRAMS:
            return True
    return False


class LabelGuard:
    """Caps the distinct values of one untrusted label (thread-safe)."""

    def __init__(self, max_values: int = DEFAULT_MAX_LABEL_VALUES) -> None:
        if max_values < 1:
            raise ValueError(f"max_values must be >= 1, got {max_values}")
        self._max = max_values
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str) -> str:
        value = value[:_MAX_LABEL_CHARS] or "unknown"
        with self._lock:
            if value in self._seen:
                return value
            if len(self._seen) >= self._max:
                return OTHER
            self._seen.add(value)
            return value


class Metrics:
    """The metric objects plus the helpers the pipeline calls to record events."""

    def __init__(
        self,
        registry: CollectorRegistry = REGISTRY,
        max_assistants: int = DEFAULT_MAX_LABEL_VALUES,
    ) -> None:
        self.registry = registry
        self._assistant = LabelGuard(max_assistants)
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self._sampling_children: dict[tuple[bool, str, str], Any] = {}
        self._judged_primed: set[str] = set()  # assistants whose band series exist (see below)
        r = registry

        # Which build is running: join on it to split any panel by version during a rollout.
        self.build_info = Gauge(
            "casewatch_build_info", "casewatch build; value is 1", ["version"], registry=r
        )
        self.build_info.labels(version=__version__).set(1)

        # Intake rate per topic: the denominator of every sampling and failure ratio.
        self.turns_consumed = Counter(
            "casewatch_turns_consumed", "Records read from the broker", ["topic"], registry=r
        )
        # Turns chosen for judging, by why (rate, always-judge rule name, ...).
        self.turns_sampled = Counter(
            "casewatch_turns_sampled",
            "Turns selected for judging",
            ["assistant", "reason"],
            registry=r,
        )
        # Turns not judged, by why (rate, budget exhausted, ...): a budget alert watches this.
        self.turns_skipped = Counter(
            "casewatch_turns_skipped",
            "Valid turns not selected for judging",
            ["assistant", "reason"],
            registry=r,
        )
        # The headline quality signal: turns per severity band (or judge_failed).
        self.turns_judged = Counter(
            "casewatch_turns_judged",
            "Turns judged, by turn band ('judge_failed' when no judge could score)",
            ["assistant", "band"],
            registry=r,
        )
        # Which metric drives a regression: per-metric band counts.
        self.metric_band = Counter(
            "casewatch_metric_band",
            "Per-metric severity bands of judged turns",
            ["assistant", "metric", "band"],
            registry=r,
        )
        # Score distributions for drift detection (quantiles over time windows).
        self.score_final = Histogram(
            "casewatch_score_final",
            "Weighted S_final of judged turns",
            ["assistant"],
            buckets=SCORE_BUCKETS,
            registry=r,
        )
        self.metric_score = Histogram(
            "casewatch_metric_score",
            "Per-metric scores of judged turns",
            ["assistant", "metric"],
            buckets=SCORE_BUCKETS,
            registry=r,
        )
        # Judge health: one request = one logical judging of a turn (retries included).
        self.judge_requests = Counter(
            "casewatch_judge_requests",
            "Judge requests by outcome (ok|failed)",
            ["judge", "outcome"],
            registry=r,
        )
        # Retries beyond the first attempt: a rising rate warns before failures do.
        self.judge_retries = Counter(
            "casewatch_judge_retries", "Judge attempts beyond the first", ["judge"], registry=r
        )
        # Why judging failed (bounded by monitor.judging.judge.FAILURE_REASONS).
        self.judge_failed = Counter(
            "casewatch_judge_failed",
            "Judge requests that ended judge_failed, by reason",
            ["judge", "reason"],
            registry=r,
        )
        self.judge_latency = Histogram(
            "casewatch_judge_latency_seconds",
            "Wall time of one judge request, retries included",
            ["judge"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        # Spend: tokens and dollars, so a budget alert fires before the invoice does.
        self.judge_tokens = Counter(
            "casewatch_judge_tokens",
            "Tokens used by judges (kind=input|output)",
            ["judge", "kind"],
            registry=r,
        )
        self.judge_cost = Counter(
            "casewatch_judge_cost_usd", "Judge cost in US dollars", ["judge"], registry=r
        )
        # Poison records by reason: a producer shipping a bad schema shows up here first.
        self.dead_letter = Counter(
            "casewatch_dead_letter",
            "Records sent to the dead-letter queue",
            ["reason"],
            registry=r,
        )
        # Backpressure: turns held by the pipeline and partitions paused because it is full.
        self.in_flight = Gauge("casewatch_in_flight", "Turns consumed but not finished", registry=r)
        self.paused_partitions = Gauge(
            "casewatch_paused_partitions",
            "Partitions paused for backpressure",
            registry=r,
        )
        # Falling behind the producers: end offset minus committed offset.
        self._lag_series: set[tuple[str, str]] = set()
        self._lag_lock = threading.Lock()
        self.consumer_lag = Gauge(
            "casewatch_consumer_lag",
            "Records behind the end of the partition",
            ["topic", "partition"],
            registry=r,
        )
        # Progress of at-least-once delivery: offset commits per topic, and their failures.
        self.offsets_committed = Counter(
            "casewatch_offsets_committed",
            "Successful offset commits (per topic)",
            ["topic"],
            registry=r,
        )
        self.commit_failures = Counter(
            "casewatch_commit_failures",
            "Offset commits the broker refused (retried on the next interval)",
            registry=r,
        )
        # Idempotency at work: duplicates are replays (restarts, rebalances), not new verdicts.
        self.stored = Counter(
            "casewatch_stored",
            "Verdict rows written (outcome=inserted|duplicate)",
            ["outcome"],
            registry=r,
        )
        # Database trouble: writes are retried with backoff and /readyz turns unready.
        self.storage_errors = Counter(
            "casewatch_storage_errors", "Failed verdict writes (retried)", registry=r
        )

        # Judge panel (seed 003). Per-turn agreement: the disagreement rate is
        # disagreed / all, and the arbiter budget is arbiter_calls / all.
        self.panel_turns = Counter(
            "casewatch_panel_turns",
            "Turns scored by a two-primary panel (agreement=agreed|disagreed|primary_failed)",
            ["assistant", "agreement"],
            registry=r,
        )
        # Which metrics the primaries disagree on: a metric that splits judges is ill-defined.
        self.disagreements = Counter(
            "casewatch_disagreements",
            "Metrics whose bands differed between the two primaries",
            ["assistant", "metric"],
            registry=r,
        )
        # The arbiter is the expensive part: its call rate is the point of arbitration.
        self.arbiter_calls = Counter(
            "casewatch_arbiter_calls", "Turns sent to the arbiter", ["assistant"], registry=r
        )
        # A primary the arbiter keeps overruling is the weaker judge.
        self.arbitration_outcome = Counter(
            "casewatch_arbitration_outcome",
            "Which primary the arbiter sided with (primary_a|primary_b|both|neither)",
            ["assistant", "sided_with"],
            registry=r,
        )
        self.judge_cost_by_role = Counter(
            "casewatch_judge_cost_usd_by_role",
            "Judge cost in US dollars by panel role (primary|arbiter)",
            ["role"],
            registry=r,
        )

        # Scheduled jobs: a job that keeps failing (or never runs) is an alert of its own.
        self.job_runs = Counter(
            "casewatch_job_runs",
            "Scheduled job runs (outcome=ok|failed|skipped: another replica holds the lease)",
            ["job", "outcome"],
            registry=r,
        )
        self.job_last_success = Gauge(
            "casewatch_job_last_success_timestamp_seconds",
            "Unix time of the job's last successful run on this replica",
            ["job"],
            registry=r,
        )

        # Drift (recent window vs reference window, per assistant; bounded signal set).
        self.drift_pvalue = Gauge(
            "casewatch_drift_pvalue",
            "Benjamini-Hochberg adjusted p-value of the drift test (NaN: insufficient data)",
            ["assistant", "signal"],
            registry=r,
        )
        self.drift_effect = Gauge(
            "casewatch_drift_effect",
            "Effect size of the drift signal (statistic named in the README per signal)",
            ["assistant", "signal"],
            registry=r,
        )
        self.drift_detected = Gauge(
            "casewatch_drift_detected",
            "1 when the signal drifted (significant and a non-trivial effect), else 0",
            ["assistant", "signal"],
            registry=r,
        )
        self.drift_last_run = Gauge(
            "casewatch_drift_last_run_timestamp_seconds",
            "Unix time the drift analysis last completed",
            registry=r,
        )
        self.drift_window_turns = Gauge(
            "casewatch_drift_window_turns",
            "Judged turns in each drift window (window=recent|reference)",
            ["assistant", "window"],
            registry=r,
        )

        # Baseline tiers (seed 000): is the assistant still better than High, never worse than Low?
        self.baseline_win_rate = Gauge(
            "casewatch_baseline_win_rate",
            "Assistant's pairwise score share against a baseline tier (ties count half)",
            ["assistant", "tier"],
            registry=r,
        )
        self.baseline_outcomes = Counter(
            "casewatch_baseline_outcomes",
            "Pairwise outcomes against baseline tiers (outcome=win|tie|loss)",
            ["assistant", "tier", "outcome"],
            registry=r,
        )
        self.elo_rating = Gauge(
            "casewatch_elo_rating", "Elo rating among the baseline tiers", ["assistant"], registry=r
        )
        self.pairwise_confidence = Counter(
            "casewatch_pairwise_confidence",
            "Pairwise decisions by confidence kind (hard|soft|unknown)",
            ["assistant", "kind"],
            registry=r,
        )
        self.pairwise_position_disagreement = Gauge(
            "casewatch_pairwise_position_disagreement",
            "Mean |score(A,B) - score(B,A) swapped| over the last run: position bias",
            ["assistant"],
            registry=r,
        )
        # Rubric grading (seed 001): per graded live answer, the share of its rubric entry's
        # questions answered with grade >= rubric.covered_grade (4); a falling median or a
        # growing 0 bucket says answers stopped covering what the known issue needs.
        self.rubric_coverage = Histogram(
            "casewatch_rubric_coverage",
            "Share of rubric questions a live answer covers (grade >= covered_grade), per answer",
            ["assistant"],
            buckets=COVERAGE_BUCKETS,
            registry=r,
        )
        # Live answers graded against a rubric entry (outcome=ok|failed|budget).
        self.rubric_graded = Counter(
            "casewatch_rubric_graded",
            "Live turns graded against a rubric entry (outcome=ok|failed|budget)",
            ["assistant", "outcome"],
            registry=r,
        )
        # How the grader's replies were read (path=json|number|unanswerable|unparseable): a
        # rising unparseable share means grades defaulting to 1, i.e. a grader gone wrong.
        self.rubric_replies = Counter(
            "casewatch_rubric_replies",
            "Rubric grading replies of live answers by parse path",
            ["path"],
            registry=r,
        )

        # Rebalances that cost money: turns of revoked partitions still being judged when the
        # revoke wait ran out, so their new owner judges (and pays for) them again.
        self.revoke_abandoned = Counter(
            "casewatch_revoke_abandoned",
            "Turns of revoked partitions abandoned mid-judging (judged again by the new owner)",
            registry=r,
        )

        # Identifier tripwire: every consumed turn's answer checked for near misses of evidence
        # identifiers (sampled or not); mismatches by identifier kind. Their ratio is the share
        # of traffic with a corrupted identifier, at 100 % coverage and no judge cost.
        self.tripwire_checked = Counter(
            "casewatch_tripwire_checked",
            "Turns whose answer the identifier tripwire checked",
            ["assistant"],
            registry=r,
        )
        self.identifier_mismatch = Counter(
            "casewatch_identifier_mismatch",
            "Turns whose answer nearly matches an evidence identifier (by identifier kind)",
            ["assistant", "kind"],
            registry=r,
        )
        self.tripwire_truncated = Counter(
            "casewatch_tripwire_truncated",
            "Turns larger than the identifier tripwire's bounds, checked only in part",
            ["assistant"],
            registry=r,
        )

        # Unreadable record batches (issue 24): each failed read attempt of a partition held
        # back on a batch it cannot read (reason=codec_unavailable|corrupt; retried with a
        # backoff of at most 30 s, so increase() over a few minutes is > 0 while it is stuck).
        self.unreadable_batches = Counter(
            "casewatch_unreadable_batches",
            "Failed reads of a record batch the consumer cannot decompress or check (retried)",
            ["topic", "reason"],
            registry=r,
        )
        # A consumer group that did not form for several session timeouts (SyncGroup failing,
        # or rebalancing without end), left and joined again as a dynamic member.
        self.group_rejoins = Counter(
            "casewatch_consumer_group_rejoins",
            "Consumer group left and rejoined (dynamically) because it did not form",
            registry=r,
        )

        for outcome in ("inserted", "duplicate"):
            self.stored.labels(outcome=outcome)
        self._drift_series: dict[str, set[str]] = {}
        self._drift_lock = threading.Lock()

    # ------------------------------------------------------------------ recording helpers

    def prime(self, *, topics: Iterable[str] = (), dead_letter_reasons: Iterable[str] = ()) -> None:
        """Export zero-valued series for label values known up front, so ``rate()`` and
        ``increase()`` see the first event instead of a series appearing out of nowhere."""
        for topic in topics:
            self.turns_consumed.labels(topic=topic)
            self.offsets_committed.labels(topic=topic)
        for reason in dead_letter_reasons:
            self.dead_letter.labels(reason=reason)

    def assistant_label(self, name: str) -> str:
        return self._assistant(name)

    def record_consumed(self, topic: str, count: int = 1) -> None:
        self.turns_consumed.labels(topic=topic).inc(count)

    def record_sampling(self, assistant: str, decision: Decision, count: int = 1) -> None:
        key = (decision.sampled, assistant, decision.reason)
        child = self._sampling_children.get(key)
        if child is None:
            counter = self.turns_sampled if decision.sampled else self.turns_skipped
            child = counter.labels(assistant=self._assistant(assistant), reason=decision.reason)
            if len(self._sampling_children) < _SAMPLING_CACHE_MAX:
                self._sampling_children[key] = child
        child.inc(count)

    def record_tripwire(
        self,
        assistant: str,
        checked: int,
        mismatches: Iterable[tuple[str, int]] = (),
        truncated: int = 0,
    ) -> None:
        """``checked`` turns of ``assistant``; ``mismatches``: (identifier kind, turns);
        ``truncated``: turns checked only as far as the tripwire's bounds."""
        label = self._assistant(assistant)
        self.tripwire_checked.labels(assistant=label).inc(checked)
        # Created at 0 with the first check, so the share on the pipeline dashboard reads 0
        # (not "no data") and rate() counts the first truncated turn.
        partial = self.tripwire_truncated.labels(assistant=label)
        if truncated:
            partial.inc(truncated)
        for kind, n in mismatches:
            self.identifier_mismatch.labels(assistant=label, kind=kind).inc(n)

    def record_already_judged(self, assistant: str, count: int = 1) -> None:
        """Sampled turns not judged because the store already holds their verdict under the
        current judge configuration (a replay after a crash or a rebalance): no judge call."""
        label = self._assistant(assistant)
        self.turns_skipped.labels(assistant=label, reason=ALREADY_JUDGED).inc(count)

    def record_dead_letter(self, reason: str) -> None:
        self.dead_letter.labels(reason=reason).inc()

    def record_storage_error(self) -> None:
        self.storage_errors.inc()

    def record_job_run(self, job: str, outcome: str, finished_at: float) -> None:
        self.job_runs.labels(job=job, outcome=outcome).inc()
        if outcome == "ok":
            self.job_last_success.labels(job=job).set(finished_at)

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
        self.rubric_graded.labels(assistant=label, outcome=outcome).inc()
        if coverage is not None:
            self.rubric_coverage.labels(assistant=label).observe(coverage)
        for path, n in (paths or {}).items():
            if n:
                self.rubric_replies.labels(path=path).inc(n)

    def record_commit_failure(self) -> None:
        self.commit_failures.inc()

    def record_stored(self, inserted: int, duplicate: int) -> None:
        if inserted:
            self.stored.labels(outcome="inserted").inc(inserted)
        if duplicate:
            self.stored.labels(outcome="duplicate").inc(duplicate)

    def record_commit(self, topics: Iterable[str]) -> None:
        for topic in topics:
            self.offsets_committed.labels(topic=topic).inc()

    def set_lag(self, lag: Iterable[tuple[tuple[str, int], int]]) -> None:
        """Replace the lag series (``lag`` as ``dict.items()`` of (topic, partition) -> lag):
        partitions no longer assigned disappear instead of freezing at their last value."""
        current: set[tuple[str, str]] = set()
        for (topic, partition), value in lag:
            key = (topic, str(partition))
            current.add(key)
            self.consumer_lag.labels(*key).set(value)
        # Removed one by one (not clear()): a scrape in between must not see every series gone.
        with self._lag_lock:
            for key in self._lag_series - current:
                self.consumer_lag.remove(*key)
            self._lag_series = current

    def record_panel(self, outcome: PanelOutcome) -> None:
        """One two-primary panel evaluation (the panel's ``on_result`` observer)."""
        assistant = self._assistant(outcome.assistant)
        if outcome.trigger == "primary_failed":
            agreement = "primary_failed"
        else:
            agreement = "disagreed" if outcome.disagreed else "agreed"
        self.panel_turns.labels(assistant=assistant, agreement=agreement).inc()
        for metric in outcome.disagreement_metrics:
            self.disagreements.labels(assistant=assistant, metric=metric).inc()
        if outcome.arbitrated:
            self.arbiter_calls.labels(assistant=assistant).inc()
        if outcome.sided_with is not None:
            self.arbitration_outcome.labels(
                assistant=assistant, sided_with=outcome.sided_with
            ).inc()
        for role, usd in outcome.cost_by_role.items():
            if usd > 0:
                self.judge_cost_by_role.labels(role=role).inc(usd)

    def _child(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, remembered: the verdict path records ~25 series per turn
        and prometheus_client's ``labels()`` validates and locks on every call (about 5 % of the
        daemon's CPU at 150 judged turns/s, bench/judging.py). Only series never removed go
        through here."""
        key = (id(metric), values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def record_verdict(self, verdict: Verdict) -> None:
        """Turn-level, metric-level and per-judge series for one finished verdict."""
        assistant = self._assistant(verdict.assistant.name)
        child = self._child
        if assistant not in self._judged_primed:
            # Every band of a new assistant starts at 0, so that rate()/increase() in rules/
            # count its first severe turn (a series born at 1 loses that first increment).
            self._judged_primed.add(assistant)
            for band in (*(b.value for b in Band), "judge_failed"):
                child(self.turns_judged, assistant, band)
        if verdict.status == "ok" and verdict.turn_band is not None:
            child(self.turns_judged, assistant, str(verdict.turn_band)).inc()
            if verdict.s_final is not None:
                child(self.score_final, assistant).observe(verdict.s_final)
            for metric, score in verdict.metric_scores.items():
                child(self.metric_score, assistant, metric).observe(score)
            for metric, band in verdict.metric_bands.items():
                child(self.metric_band, assistant, metric, str(band)).inc()
        else:
            child(self.turns_judged, assistant, "judge_failed").inc()
        for j in verdict.judgments:
            judge = j.judge
            child(self.judge_requests, judge, "ok" if j.ok else "failed").inc()
            if not j.ok:
                reason = j.failure_reason if j.failure_reason in FAILURE_REASONS else "internal"
                child(self.judge_failed, judge, reason).inc()
            if j.attempts > 1:
                child(self.judge_retries, judge).inc(j.attempts - 1)
            child(self.judge_latency, judge).observe(j.latency_seconds)
            if j.input_tokens:
                child(self.judge_tokens, judge, "input").inc(j.input_tokens)
            if j.output_tokens:
                child(self.judge_tokens, judge, "output").inc(j.output_tokens)
            if j.cost_usd:
                child(self.judge_cost, judge).inc(j.cost_usd)

    # ------------------------------------------------------------------ drift (jobs/drift.py)

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
        with self._drift_lock:
            self._drift_series.setdefault(label, set()).add(signal)
        nan = float("nan")
        self.drift_pvalue.labels(label, signal).set(nan if q_value is None else q_value)
        self.drift_effect.labels(label, signal).set(nan if effect is None else effect)
        self.drift_detected.labels(label, signal).set(1 if detected else 0)

    def record_drift_windows(self, assistant: str, *, recent: int, reference: int) -> None:
        label = self._assistant(assistant)
        self.drift_window_turns.labels(label, "recent").set(recent)
        self.drift_window_turns.labels(label, "reference").set(reference)

    def record_drift_run(self, finished_at: float) -> None:
        self.drift_last_run.set(finished_at)

    def forget_drift(self, assistant: str) -> None:
        """Drop an assistant's drift series (it left both windows): no frozen last values."""
        label = self._assistant(assistant)
        with self._drift_lock:
            signals = self._drift_series.pop(label, set())
        for signal in signals:
            for gauge in (self.drift_pvalue, self.drift_effect, self.drift_detected):
                with contextlib.suppress(KeyError):
                    gauge.remove(label, signal)
        for window in ("recent", "reference"):
            with contextlib.suppress(KeyError):
                self.drift_window_turns.remove(label, window)
