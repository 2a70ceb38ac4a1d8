"""Every Prometheus metric casewatch exports, declared in one place: ``Metrics``.

``rules/`` and ``dashboards/`` refer only to names in ``METRIC_NAMES`` (a test checks it), and
``METRIC_NAMES`` is read off the declarations below, so a metric is added here, with a comment
saying what it answers, never ad hoc elsewhere.

Values are set only by the recorder of the feature that owns the metric, beside the feature:
``monitor/stream/recorder.py`` (intake, sampling, tripwire, storage, commits, backpressure,
lag, rebalances), ``monitor/judging/recorder.py`` (verdicts, judge requests, the panel) and
``monitor/jobs/recorders.py`` (job runs, drift, rubric grading, baseline tiers). Nothing else
calls ``labels()`` or sets a value (tests/monitor/metrics/test_exporter.py checks the source).

Labels are bounded: assistant, metric, band, judge, topic, partition, reason, outcome, kind,
config_hash (one per judge configuration a replica runs with) — never conversation or event
ids. Assistant names come from the events themselves (untrusted),
so ``LabelGuard`` caps how many distinct values one label may take; later values are exported
as ``__other__`` instead of growing the series count without limit.

Every metric takes the registry it registers into; tests build a fresh ``CollectorRegistry``
and read values back with ``registry.get_sample_value(name, labels)``. Whether ``*_created``
series are exported is a process-wide switch of prometheus_client, so it is thrown by the
entrypoints (``disable_created_series``), not on import.
"""

from __future__ import annotations

import threading

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)

from monitor import __version__
from monitor.metrics.scrape_body import FALLBACK_REASONS
from monitor.scoring.turn import BAND_BUCKET_BOUNDS

# Why a dead-lettered record is held uncommitted (the stream's steps name these: steps/base.py's
# HELD_* constants, checked equal by tests/monitor/stream/steps/test_decode_dead_letters.py).
DEAD_LETTER_HELD_WHY: tuple[str, ...] = ("refused", "unavailable", "unacknowledged", "backlog")

# Score buckets include the band bounds of the Case-Aware paper's appendix B
# (scoring.BAND_BUCKET_BOUNDS: the top of severe, moderate and minor, just below 0.31 / 0.61 /
# 0.86), so a bucket ratio reads directly as a band share: a score of 0.305 is severe and counted
# in the severe bucket.
SCORE_BUCKETS: tuple[float, ...] = tuple(
    sorted({0.1, 0.2, 0.4, 0.5, 0.7, 0.8, 0.9, 1.0, *BAND_BUCKET_BOUNDS})
)
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

OTHER = "__other__"
DEFAULT_MAX_LABEL_VALUES = 100
_MAX_LABEL_CHARS = 64


def disable_created_series() -> None:
    """No ``*_created`` samples in any registry of this process (the entrypoints call it: the
    CLI, the daemon runner). Prometheus ignores them in the text format, and at the full label
    set (100 assistants x 8 metrics x bands) they are a fifth of every scrape
    (bench/scrape.py)."""
    disable_created_metrics()  # type: ignore[no-untyped-call]


# The review queue's bounded label values (jobs/review_queue.py).
REVIEW_REASONS: tuple[str, ...] = ("severe", "disagreement", "uncertain")
REVIEW_FAILURES: tuple[str, ...] = (
    "unreachable", "timeout", "refused", "server_error", "unreadable",
)  # fmt: skip
REVIEW_OUTCOMES: tuple[str, ...] = (
    "stored", "unknown_band", "unknown_metric", "unknown_turn", "unreadable", "empty",
)  # fmt: skip


# Failure modes exported per assistant: the largest, by rank (jobs/failure_modes.py).
FAILURE_MODE_RANKS: int = 5
# The largest failure modes since an alarmed detector's change point (jobs/detection.py).
SINCE_CHANGE_RANKS: int = 3


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


def process_registry() -> CollectorRegistry:
    """A registry of its own for one daemon, with the process, platform and GC collectors the
    process-wide one has: a daemon run inside another program (a test, the demo) registers
    nothing that outlives it."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


class Metrics:
    """Every metric family, registered into ``registry``; recorders (see the module docstring)
    are the only code that sets their values."""

    def __init__(
        self,
        registry: CollectorRegistry = REGISTRY,
        max_assistants: int = DEFAULT_MAX_LABEL_VALUES,
    ) -> None:
        self.registry = registry
        # One guard shared by every recorder: the cap is on distinct assistants across all the
        # families of this instance, not per family.
        self.assistant_label = LabelGuard(max_assistants)
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
        # The hourly judge budget of this replica (stream and jobs), per unit (calls: judge
        # requests; usd): reserved for turns and runs not settled yet. Returns to 0 when
        # nothing is being judged; one that stays up is budget stranded.
        self.judge_budget_reserved = Gauge(
            "casewatch_judge_budget_reserved",
            "Judge budget reserved and not settled yet, by unit (calls|usd)",
            ["unit"],
            registry=r,
        )
        # Judge budget spent in the last hour (by the minute), by unit.
        self.judge_budget_spent = Gauge(
            "casewatch_judge_budget_spent",
            "Judge budget spent in the last hour, by unit (calls|usd)",
            ["unit"],
            registry=r,
        )
        # What the next reservation is checked against (the bucket refills continuously);
        # at or near 0 turns are skipped budget_calls/budget_usd. Only limited units.
        self.judge_budget_available = Gauge(
            "casewatch_judge_budget_available",
            "Judge budget available now, by unit (calls|usd); only units with a limit",
            ["unit"],
            registry=r,
        )
        # The configured hourly limit, by unit; only units with a limit.
        self.judge_budget_limit = Gauge(
            "casewatch_judge_budget_limit",
            "Judge budget per hour, by unit (calls|usd); only units with a limit",
            ["unit"],
            registry=r,
        )
        # The headline quality signal: turns per severity band (or judge_failed).
        self.turns_judged = Counter(
            "casewatch_turns_judged",
            "Turns judged, by turn band ('judge_failed' when no judge could score)",
            ["assistant", "band"],
            registry=r,
        )
        # The severe share over traffic rather than over what was judged: each judged turn adds
        # 1/inclusion probability (sampling.strategy: cascade draws turns unequally; 1 for a
        # rule's turn and under uniform sampling, so there it equals casewatch_turns_judged_total).
        # The share's rules and panels divide its severe band's rate by the judged bands' (Hajek).
        self.turns_judged_weight = Counter(
            "casewatch_turns_judged_weight",
            "Judged turns weighted by 1/inclusion probability, by turn band (sum of weights)",
            ["assistant", "band"],
            registry=r,
        )
        # Per-metric band counts of the turns judged (what was judged, unweighted: the volume
        # behind a per-metric share; a weight adds no evidence). Under sampling.strategy:
        # cascade its shares are those of what was judged, which over-draws risky turns: which
        # metric drives a regression is read from casewatch_metric_band_weight_total.
        self.metric_band = Counter(
            "casewatch_metric_band",
            "Per-metric severity bands of judged turns",
            ["assistant", "metric", "band"],
            registry=r,
        )
        # Which metric drives a regression: the per-metric shares over traffic rather than over
        # what was judged. Each judged turn adds 1/inclusion probability to its band of every
        # metric, where its turn band's weight is added (1 for a rule's turn and under uniform
        # sampling, so there it equals casewatch_metric_band_total). The per-metric rules and
        # panels divide a band's rate by the metric's bands' (Hajek).
        self.metric_band_weight = Counter(
            "casewatch_metric_band_weight",
            "Per-metric severity bands of judged turns weighted by 1/inclusion probability "
            "(sum of weights)",
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
        # Dead letters not (yet) durable hold their records uncommitted: why=refused (the write
        # failed, sent again), unavailable (the sink took nothing), unacknowledged (in flight
        # when a drain's flush ended), backlog (the bound of dead letters in flight: intake
        # waits). A rising rate means the dead-letter topic cannot be written.
        self.dead_letters_held = Counter(
            "casewatch_dead_letters_held",
            "Dead-lettered records held uncommitted because their dead letter is not durable",
            ["why"],
            registry=r,
        )
        for why in DEAD_LETTER_HELD_WHY:  # exported at 0 from the start: rate() sees the first
            self.dead_letters_held.labels(why=why)
        # OpenTelemetry intake: traces being assembled (bounded by assembly.max_open_traces and
        # max_open_spans) and why each finished (root, idle, cap, too_many_spans). A rising
        # `cap` rate means traces are cut short: raise the caps or lower idle_seconds.
        self.open_traces = Gauge(
            "casewatch_open_traces", "Traces being assembled from OTLP spans", registry=r
        )
        self.open_spans = Gauge(
            "casewatch_open_spans", "Spans held in traces being assembled", registry=r
        )
        self.traces_finished = Counter(
            "casewatch_traces_finished",
            "Traces assembled from OTLP spans, by what finished them",
            ["cause"],
            registry=r,
        )
        # With assembly.repartition: per-trace parts of OTLP batches re-published keyed by
        # trace id (sent: acknowledged; failed: a send that failed and is tried again, the
        # source message held uncommitted meanwhile). A failed rate with no sent: the
        # repartition topic is missing or the broker refuses the producer.
        self.spans_repartitioned = Counter(
            "casewatch_spans_repartitioned",
            "OTLP batch parts re-published keyed by trace id, by outcome (sent, failed)",
            ["outcome"],
            registry=r,
        )
        # Verdicts written back as gen_ai.evaluation.result log records, by outcome
        # (exported, queue_full, export_failed): the drop alert watches the last two.
        self.evaluation_records = Counter(
            "casewatch_evaluation_records",
            "gen_ai.evaluation.result log records, by outcome",
            ["outcome"],
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

        # Judge panel (DAFE). Per-turn agreement: the disagreement rate is
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
            "Effect size of the drift signal (its statistic per signal: docs/drift.md)",
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

        # Failure modes (jobs/failure_modes.py, docs/failure-modes.md): each assistant's failed
        # turns, and apart its failed cases, of the window grouped into recurring causes.
        # unit: turn | case (what the modes group; the turns' series are unit="turn"). rank: a
        # mode's place by size in the newest run, "1".."5" (FAILURE_MODE_RANKS): mode ids stay
        # in the store and in `casewatch inspect failures`, never in labels.
        self.failure_mode_turns = Gauge(
            "casewatch_failure_mode_turns",
            "Failed turns (unit=turn) or cases (unit=case) in each of the largest failure modes "
            "of the newest run (rank=1..5)",
            ["assistant", "unit", "rank"],
            registry=r,
        )
        self.failure_modes = Gauge(
            "casewatch_failure_modes",
            "Failure modes the newest grouping run found (unit=turn | case)",
            ["assistant", "unit"],
            registry=r,
        )
        self.failure_modes_emerging = Gauge(
            "casewatch_failure_modes_emerging",
            "Failure modes of the newest run that are new or grow faster than their history "
            "allows (unit=turn | case)",
            ["assistant", "unit"],
            registry=r,
        )
        self.failure_mode_window_turns = Gauge(
            "casewatch_failure_mode_window_turns",
            "Failed turns or cases of the newest run's window (outcome=grouped | unsorted: in no "
            "mode | over_cap: past failure_modes.max_turns, not read; unit=turn | case)",
            ["assistant", "unit", "outcome"],
            registry=r,
        )
        self.failure_mode_runs = Counter(
            "casewatch_failure_mode_runs",
            "Grouping runs per assistant and unit (outcome=grouped | too_few_turns: nothing "
            "grouped)",
            ["assistant", "unit", "outcome"],
            registry=r,
        )
        # A grouping whose embeddings endpoint (failure_modes.embeddings) failed it: grouped on
        # the TF-IDF text features instead. reason: down | timeout | error | malformed |
        # over_cap (monitor/judging/embeddings.py).
        self.failure_mode_embedding_fallback = Counter(
            "casewatch_failure_mode_embedding_fallback",
            "Groupings that fell back from embeddings to TF-IDF text features, by reason",
            ["reason"],
            registry=r,
        )

        # Baseline tiers (DICE): is the assistant still better than High, never worse than Low?
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
        # Rubric grading (Pencils Down): per graded live answer, the share of its rubric entry's
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
        # Judged turns the turn detectors could not observe (jobs/detection.py). Under the
        # cascade they are cell-conditional and observe every drawn turn but no_cell (no cheap
        # cell stored: judged before the cascade) and cell_without_baseline (a cell the reference
        # window holds no turn of); under the uniform strategy, cascade_draw (a turn the cascade
        # drew, not a uniform sample).
        self.detector_left_out = Counter(
            "casewatch_detector_left_out",
            "Judged turns the sequential detectors did not observe, by reason (no_cell, "
            "cell_without_baseline, cascade_draw)",
            ["assistant", "reason"],
            registry=r,
        )
        # The cascade's cheap look (sampling.strategy: cascade): every consumed turn by the
        # offline judge's band. Its own severe share sits beside the LLM judge's weighted one,
        # never in its place.
        self.cheap_look_turns = Counter(
            "casewatch_cheap_look_turns",
            "Turns the cascade's cheap look (the offline judge) put in each band",
            ["assistant", "cell"],
            registry=r,
        )
        # Redaction (monitor/redaction/): values pseudonymized, by kind (e-mail, phone, card,
        # iban, secret, ip, host or an operator pattern's name). Never the values themselves.
        self.redactions = Counter(
            "casewatch_redactions",
            "Values replaced by a placeholder before judging, storing or dead-lettering",
            ["kind"],
            registry=r,
        )
        # Sequential detectors (jobs/detection.py): per assistant and signal (turn_severe or
        # <critical metric>_severe).
        detector = ["assistant", "signal"]
        self.detector_statistic = Gauge(
            "casewatch_detector_statistic",
            "Largest CUSUM statistic of the detector's shifts as a fraction of its threshold "
            "(1.0 = threshold; 0 while not armed)",
            detector,
            registry=r,
        )
        self.detector_alarm = Gauge(
            "casewatch_detector_alarm",
            "1 while the detector holds an alarm (from the first crossing until the rate "
            "returns to the baseline), else 0",
            detector,
            registry=r,
        )
        self.detector_armed = Gauge(
            "casewatch_detector_armed",
            "1 when the detector has a baseline (enough reference turns or a pinned rate)",
            detector,
            registry=r,
        )
        self.detector_baseline_rate = Gauge(
            "casewatch_detector_baseline_rate",
            "In-control severe rate p0 the detector tests against (NaN: not armed)",
            detector,
            registry=r,
        )
        self.detector_rate_since = Gauge(
            "casewatch_detector_rate_since_change",
            "Observed severe rate since the estimated change point (only while in alarm)",
            detector,
            registry=r,
        )
        self.detector_change_point = Gauge(
            "casewatch_detector_change_point_timestamp_seconds",
            "Unix time of the estimated change point (only while in alarm)",
            detector,
            registry=r,
        )
        # The largest failure modes among an assistant's failed turns since an alarmed
        # detector's change point (jobs/detection.py over the failure-modes job's newest
        # grouping), rank "1".."3" (SINCE_CHANGE_RANKS), only while the detector holds its
        # alarm. The mode's id is the VALUE (its number: `casewatch inspect failure NUMBER`),
        # never a label; CasewatchQualityRegressionDetected's annotations name them.
        since_change = ["assistant", "signal", "rank"]
        self.failure_mode_since_change_id = Gauge(
            "casewatch_failure_mode_since_change_id",
            "Number of the failure mode at this rank among the failed turns since the alarmed "
            "detector's change point (casewatch inspect failure NUMBER; only while in alarm)",
            since_change,
            registry=r,
        )
        self.failure_mode_since_change_share = Gauge(
            "casewatch_failure_mode_since_change_share",
            "Share of the failed turns since the alarmed detector's change point in the failure "
            "mode at this rank (only while in alarm)",
            since_change,
            registry=r,
        )
        self.detector_last_run = Gauge(
            "casewatch_detector_last_run_timestamp_seconds",
            "Unix time the detection job last completed on this replica",
            registry=r,
        )
        # The severe rate corrected by human labels (jobs/quality_estimate.py; signal: KEY for
        # the corrected estimate, KEY_judge_only and KEY_labels_only beside it).
        self.quality_estimate = Gauge(
            "casewatch_quality_estimate",
            "Severe rate of an assistant corrected by human labels (PPI++), with the judge-only "
            "and labels-only rates; bound=point|lower|upper of the 95 % interval",
            ["assistant", "signal", "bound"],
            registry=r,
        )
        # The same rate, anytime-valid (jobs/quality_estimate.py): a confidence sequence over the
        # assistant's labelled batches that holds at every look, which is how a dashboard that
        # refreshes is read; wider than the fixed-n interval above.
        self.quality_estimate_anytime = Gauge(
            "casewatch_quality_estimate_anytime",
            "Severe rate corrected by human labels, running mean over the labelled batches, "
            "with bounds valid at every look; bound=point|lower|upper",
            ["assistant", "signal", "bound"],
            registry=r,
        )
        # The review queue (jobs/review_queue.py, docs/review-queue.md): turns sent to people on
        # a Label Studio server and their annotations brought back as labels. reason of a
        # queued/pushed task: severe (the judge called it severe) | disagreement (a user's
        # feedback disputes the judge's band) | uncertain (drawn with a probability); of a
        # failure: unreachable|timeout|refused|server_error|unreadable.
        self.review_tasks_queued = Counter(
            "casewatch_review_tasks_queued",
            "Turns queued for review (reason=severe|disagreement|uncertain)",
            ["reason"],
            registry=r,
        )
        self.review_tasks_pushed = Counter(
            "casewatch_review_tasks_pushed",
            "Review tasks created on the annotation server (reason=severe|disagreement|uncertain)",
            ["reason"],
            registry=r,
        )
        self.review_failures = Counter(
            "casewatch_review_failures",
            "Failed calls to the annotation server (stage=push|pull; reason=unreachable|timeout|"
            "refused|server_error|unreadable); what was not pushed stays in the backlog",
            ["stage", "reason"],
            registry=r,
        )
        self.review_backlog = Gauge(
            "casewatch_review_backlog",
            "Turns queued for review and not pushed to the annotation server yet",
            registry=r,
        )
        self.review_annotations = Counter(
            "casewatch_review_annotations",
            "Annotation versions pulled from the annotation server, by outcome (stored | "
            "refused: unknown_band|unknown_metric|unknown_turn|unreadable|empty)",
            ["outcome"],
            registry=r,
        )
        # Agreement of the judge's bands (when queued) with the reviewers' over an assistant's
        # reviewed turns: severe and uncertain ones, so not the assistant's overall agreement.
        self.review_agreement = Gauge(
            "casewatch_review_agreement",
            "Share of reviewed turns whose judge band (when queued) the reviewers gave, per "
            "signal (a metric or turn_band)",
            ["assistant", "signal"],
            registry=r,
        )
        for reason in REVIEW_REASONS:  # exported at 0 from the start: increase() sees a 1
            self.review_tasks_queued.labels(reason=reason)
            self.review_tasks_pushed.labels(reason=reason)
        for stage in ("push", "pull"):
            for reason in REVIEW_FAILURES:
                self.review_failures.labels(stage=stage, reason=reason)
        for outcome in REVIEW_OUTCOMES:
            self.review_annotations.labels(outcome=outcome)

        # The judge canary (jobs/judge_canary.py): a fixed labelled set re-judged on a schedule
        # by each live judge (judge: a configured judge name, bounded by the configuration).
        self.judge_canary_agreement = Gauge(
            "casewatch_judge_canary_agreement",
            "Share of the canary's labelled bands the judge matched on its last successful run",
            ["judge"],
            registry=r,
        )
        self.judge_canary_score_shift = Gauge(
            "casewatch_judge_canary_score_shift",
            "Mean S_final on the canary minus its mean over the first runs of this judge "
            "configuration (last successful run)",
            ["judge"],
            registry=r,
        )
        self.judge_canary_alarm = Gauge(
            "casewatch_judge_canary_alarm",
            "1 while the canary's sequential test finds the judge calling more canary turns "
            "severe than on its first runs, else 0",
            ["judge"],
            registry=r,
        )
        self.judge_canary_runs = Counter(
            "casewatch_judge_canary_runs",
            "Canary runs per judge (outcome=ok|failed: the judge failed on a canary turn|budget: "
            "skipped, the hourly judge budget refused|waiting: too few labelled turns, nothing "
            "judged)",
            ["judge", "outcome"],
            registry=r,
        )
        # The live judge configuration's hash (set by the canary job): more than one value in a
        # window means the judge configuration changed in it.
        self.judge_config_info = Gauge(
            "casewatch_judge_config_info",
            "The judge configuration this replica judges with; value is 1",
            ["config_hash"],
            registry=r,
        )

        # Cases (jobs/cases.py, docs/cases.md): conversations judged as a whole once quiet.
        # The case-level headline: case verdicts stored, by case band ('judge_failed' when no
        # case judge could score it).
        self.cases_judged = Counter(
            "casewatch_cases_judged",
            "Case verdicts stored, by case band ('judge_failed' when no judge could score)",
            ["assistant", "band"],
            registry=r,
        )
        # How cases ended as the case judge read them: the resolution rate is resolved over
        # all of them.
        self.case_resolution = Counter(
            "casewatch_case_resolution",
            "Judged cases by outcome (resolved|partial|unresolved|handed_off)",
            ["assistant", "outcome"],
            registry=r,
        )
        # Which case metric drives a case regression: per-metric band counts.
        self.case_metric_band = Counter(
            "casewatch_case_metric_band",
            "Per-metric severity bands of judged cases",
            ["assistant", "metric", "band"],
            registry=r,
        )
        # Case score distribution (weighted over the case metrics).
        self.case_score = Histogram(
            "casewatch_case_score",
            "Weighted case score of judged cases",
            ["assistant"],
            buckets=SCORE_BUCKETS,
            registry=r,
        )
        # Why a case judge failed (monitor.judging.judge.FAILURE_REASONS, panel_insufficient).
        self.case_judge_failed = Counter(
            "casewatch_case_judge_failed",
            "Case verdicts stored judge_failed, by reason (retried at the next run)",
            ["reason"],
            registry=r,
        )
        # Cases found closed but not judged by this run, by why: budget (the hourly judge
        # budget refused), duplicate (another run wrote that version first), lease_lost (this
        # replica lost the job's lease: nothing saved), gave_up (max_failures judge_failed in
        # a row: waits for a new turn), vanished (its turns were purged before it was read).
        self.cases_skipped = Counter(
            "casewatch_cases_skipped",
            "Closed cases not judged by a run, by reason",
            ["reason"],
            registry=r,
        )
        # Closed cases still waiting after the last run (more than max_cases_per_run, or the
        # budget ran out): a backlog that only grows means cases are closing faster than judged.
        self.cases_pending = Gauge(
            "casewatch_cases_pending",
            "Closed cases left unjudged after the case job's last run",
            registry=r,
        )

        # Outcome events (docs/outcomes.md): what customers said and what became of their
        # cases, on all traffic, not only sampled turns. kind: feedback_negative|_neutral|
        # _positive, handed_off, resolved, reopened, satisfaction_negative|_neutral|_positive;
        # each outcome id counted once (a duplicate is not).
        self.outcomes = Counter(
            "casewatch_outcomes",
            "Outcome events new to the store, by assistant and kind",
            ["assistant", "kind"],
            registry=r,
        )
        # What became of outcome events: inserted or duplicate (an id stored before), and
        # comment_dropped (a comment too large to redact, stored without it).
        self.outcome_events = Counter(
            "casewatch_outcome_events",
            "Outcome events read, by outcome (inserted|duplicate|comment_dropped)",
            ["outcome"],
            registry=r,
        )
        # Outcomes joined to a stored turn or case on arrival, later (the turn came after), or
        # expired: no turn within outcomes.join_window_seconds (an unknown id).
        self.outcome_joins = Counter(
            "casewatch_outcome_joins",
            "Outcome joins to stored turns (outcome=on_arrival|later|expired)",
            ["outcome"],
            registry=r,
        )
        # Outcomes stored and still waiting for their turn within the join window.
        self.outcomes_pending = Gauge(
            "casewatch_outcomes_pending",
            "Outcome events waiting for their turn or case within the join window",
            registry=r,
        )
        # The judge against the users: each feedback paired once with its turn's newest ok
        # verdict. agreement=agree_unhappy (judge flagged, user unhappy)|judge_blind (judge
        # passed, user unhappy)|judge_harsh (judge flagged, user happy)|agree_happy|
        # user_neutral.
        self.judge_user_pairs = Counter(
            "casewatch_judge_user_pairs",
            "Feedback paired with the judge's band of the same turn, by agreement",
            ["assistant", "agreement"],
            registry=r,
        )

        # Unsampled turns kept (redacted) so negative feedback can get them judged once:
        # stored, dropped (the writer's queue full, or not redactable) or failed (the database
        # did not take them). Their offsets are committed either way.
        self.turns_retained = Counter(
            "casewatch_turns_retained",
            "Unsampled turns kept for feedback, by outcome (stored|dropped|failed)",
            ["outcome"],
            registry=r,
        )
        # Turns judged because a user's feedback on them was negative (sampling reason
        # feedback), by band: never counted in casewatch_turns_judged_total, whose rates are
        # the random sample's.
        self.feedback_judged = Counter(
            "casewatch_feedback_judged",
            "Unsampled turns judged for their negative feedback, by turn band",
            ["assistant", "band"],
            registry=r,
        )

        # Unreadable record batches: each failed read attempt of a partition held
        # back on a batch it cannot read (reason=codec_unavailable|corrupt; retried with a
        # backoff of at most 30 s, so increase() over a few minutes is > 0 while it is stuck).
        self.unreadable_batches = Counter(
            "casewatch_unreadable_batches",
            "Failed reads of a record batch the consumer cannot decompress or check (retried)",
            ["topic", "reason"],
            registry=r,
        )
        # A consumer group that did not form for several session timeouts (SyncGroup failing,
        # or rebalancing without end), left and joined again: as a dynamic member, or in the
        # place of a leader the broker names but no longer has.
        self.group_rejoins = Counter(
            "casewatch_consumer_group_rejoins",
            "Consumer group left and rejoined because it did not form",
            registry=r,
        )
        # /metrics left its fast renderer for prometheus_client's own encoder, once per
        # process, by why (monitor.metrics.scrape_body.FALLBACK_REASONS: a private attribute missing
        # at start, or an AttributeError/TypeError while rendering): scrapes keep answering,
        # each costing what the library's render costs. 1: the installed prometheus-client is
        # not the version pyproject pins.
        self.exposition_fallback = Counter(
            "casewatch_exposition_fallback",
            "Times /metrics fell back to prometheus_client's own encoder, by reason",
            ["reason"],
            registry=r,
        )
        for reason in FALLBACK_REASONS:  # exported at 0 from the start: increase() sees a 1
            self.exposition_fallback.labels(reason=reason)
        # 1 per kafka-python patch (an optimisation, or a workaround of a library bug) that
        # fell back to the library's own behaviour in this process because a private name it
        # needs was missing or failed (consumers.patch_fallbacks); the optimisations are
        # exported at 0 from the first status update. 1: ingest at the library's speed, or a
        # library bug back, until kafka-python is the version pyproject pins.
        self.kafka_patch_fallback = Gauge(
            "casewatch_kafka_patch_fallback",
            "1 per kafka-python patch that fell back to the library's own behaviour, by patch",
            ["patch"],
            registry=r,
        )

        for outcome in ("inserted", "duplicate"):  # both outcomes are known up front
            self.stored.labels(outcome=outcome)


def _declared() -> tuple[tuple[str, ...], frozenset[str]]:
    """The exported family names (counters with their ``_total``) and the histograms among
    them, read off a throwaway ``Metrics``: the declarations above are the only list."""
    registry = CollectorRegistry()
    Metrics(registry)
    names: list[str] = []
    histograms: set[str] = set()
    for family in registry.collect():
        names.append(f"{family.name}_total" if family.type == "counter" else family.name)
        if family.type == "histogram":
            histograms.add(family.name)
    return tuple(names), frozenset(histograms)


# The contract rules/ and dashboards/ are checked against. Histograms also expose ``_bucket``,
# ``_sum`` and ``_count`` series; see ``is_declared``.
METRIC_NAMES, HISTOGRAMS = _declared()


def is_declared(series: str) -> bool:
    """True if ``series`` (a name found in a rule or dashboard query) is exported here."""
    if series in METRIC_NAMES:
        return True
    for suffix in ("_bucket", "_sum", "_count"):
        if series.endswith(suffix) and series[: -len(suffix)] in HISTOGRAMS:
            return True
    return False
