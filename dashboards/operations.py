"""The operations dashboards: judge health and cost, and the pipeline."""

from __future__ import annotations

from dashboards.model import (
    ASSISTANT,
    JUDGE,
    RANGE,
    RI,
    A,
    DashboardSpec,
    J,
    PanelSpec,
    Query,
    RowSpec,
    share,
)

JUDGE_REQ = f"casewatch_judge_requests_total{{{J}}}"

JUDGES = DashboardSpec(
    uid="casewatch-judges",
    title="casewatch / Judge health and cost",
    description="Judge latency, failures, retries, tokens and dollars; in panel mode, how often "
    "the arbiter is called and whom it sides with.",
    variables=(JUDGE, ASSISTANT),
    rows=(
        RowSpec(
            "Health",
            (
                PanelSpec(
                    "timeseries",
                    "Judge latency",
                    "p50 / p90 / p99 wall time of one judge request, retries included.",
                    tuple(
                        Query(
                            f"histogram_quantile({q}, sum by (le, judge) "
                            f"(rate(casewatch_judge_latency_seconds_bucket{{{J}}}{RI})))",
                            f"{{{{judge}}}} p{round(q * 100)}",
                        )
                        for q in (0.5, 0.9, 0.99)
                    ),
                    unit="s",
                ),
                PanelSpec(
                    "timeseries",
                    "Requests by outcome",
                    "Judge requests per second, ok or failed (one request = one logical "
                    "judging of a turn, retries included).",
                    (
                        Query(
                            f"sum by (judge, outcome) (rate({JUDGE_REQ}{RI}))",
                            "{{judge}} {{outcome}}",
                        ),
                    ),
                    unit="reqps",
                    stacked=True,
                ),
                PanelSpec(
                    "timeseries",
                    "Failure ratio",
                    "Share of judge requests that ended judge_failed.",
                    (
                        Query(
                            share(
                                f'casewatch_judge_requests_total{{{J}, outcome="failed"}}',
                                JUDGE_REQ,
                                "judge",
                            ),
                            "{{judge}}",
                        ),
                    ),
                    unit="percentunit",
                    min=0,
                ),
                PanelSpec(
                    "timeseries",
                    "Failures by reason",
                    "Why judging failed: invalid output after retries, timeouts, rate limits, "
                    "server errors, ...",
                    (
                        Query(
                            "sum by (judge, reason) "
                            f"(rate(casewatch_judge_failed_total{{{J}}}{RI}))",
                            "{{judge}} {{reason}}",
                        ),
                    ),
                    unit="reqps",
                    stacked=True,
                ),
                PanelSpec(
                    "timeseries",
                    "Retries",
                    "Judge attempts beyond the first per second: rising retries warn before "
                    "failures do.",
                    (
                        Query(
                            f"sum by (judge) (rate(casewatch_judge_retries_total{{{J}}}{RI}))",
                            "{{judge}}",
                        ),
                    ),
                    unit="reqps",
                    width=24,
                ),
            ),
        ),
        RowSpec(
            "Cost",
            (
                PanelSpec(
                    "timeseries",
                    "Tokens per second",
                    "Tokens used by each judge, input and output.",
                    (
                        Query(
                            f"sum by (judge, kind) (rate(casewatch_judge_tokens_total{{{J}}}{RI}))",
                            "{{judge}} {{kind}}",
                        ),
                    ),
                    stacked=True,
                ),
                PanelSpec(
                    "timeseries",
                    "USD per hour",
                    "Judge spend rate, per judge, in US dollars per hour.",
                    (
                        Query(
                            "3600 * sum by (judge) "
                            f"(rate(casewatch_judge_cost_usd_total{{{J}}}{RI}))",
                            "{{judge}}",
                        ),
                    ),
                    unit="currencyUSD",
                    stacked=True,
                ),
                PanelSpec(
                    "stat",
                    "USD over the range",
                    "Judge spend over the dashboard's time range, all judges.",
                    (
                        Query(
                            f"sum(increase(casewatch_judge_cost_usd_total{{{J}}}{RANGE}))",
                            "USD",
                            True,
                        ),
                    ),
                    unit="currencyUSD",
                ),
                PanelSpec(
                    "timeseries",
                    "USD per hour by panel role",
                    "Spend of the primaries and of the arbiter (panel mode): the arbiter "
                    "budget is the point of arbitration.",
                    (
                        Query(
                            "3600 * sum by (role) "
                            f"(rate(casewatch_judge_cost_usd_by_role_total{RI}))",
                            "{{role}}",
                        ),
                    ),
                    unit="currencyUSD",
                    stacked=True,
                ),
            ),
        ),
        RowSpec(
            "Panel and arbiter",
            (
                PanelSpec(
                    "timeseries",
                    "Arbiter share",
                    "Share of panel turns sent to the arbiter because the two primaries disagreed.",
                    (
                        Query(
                            share(
                                f"casewatch_arbiter_calls_total{{{A}}}",
                                f"casewatch_panel_turns_total{{{A}}}",
                                "assistant",
                            ),
                            "{{assistant}}",
                        ),
                    ),
                    unit="percentunit",
                    min=0,
                ),
                PanelSpec(
                    "timeseries",
                    "Panel agreement",
                    "Panel turns per second: agreed, disagreed (arbitrated) or a primary failed.",
                    (
                        Query(
                            "sum by (assistant, agreement) "
                            f"(rate(casewatch_panel_turns_total{{{A}}}{RI}))",
                            "{{assistant}} {{agreement}}",
                        ),
                    ),
                    unit="reqps",
                    stacked=True,
                ),
                PanelSpec(
                    "piechart",
                    "Arbiter sided with",
                    "Which primary the arbiter sided with over the range: a primary it keeps "
                    "overruling is the weaker judge.",
                    (
                        Query(
                            "sum by (sided_with) "
                            f"(increase(casewatch_arbitration_outcome_total{{{A}}}{RANGE}))",
                            "{{sided_with}}",
                            True,
                        ),
                    ),
                    width=24,
                ),
            ),
        ),
        # The judge canary (monitor/jobs/judge_canary.py): a fixed labelled set re-judged by
        # every live judge on a schedule; its alarm is CasewatchJudgeChanged.
        RowSpec(
            "Judge canary",
            (
                PanelSpec(
                    "timeseries",
                    "Canary agreement with people",
                    "Share of the canary's human bands each judge matched on its last "
                    "successful canary run. Empty until the canary has a set (judge_canary.file, "
                    "or labelled turns) and a run.",
                    (
                        Query(
                            f"max by (judge) (casewatch_judge_canary_agreement{{{J}}})", "{{judge}}"
                        ),
                    ),
                    unit="percentunit",
                    min=0,
                    max=1,
                ),
                PanelSpec(
                    "timeseries",
                    "Canary score shift",
                    "Mean S_final on the canary minus its mean over the first runs of this judge "
                    "configuration: below zero, the judge became harsher on the same turns.",
                    (
                        Query(
                            f"max by (judge) (casewatch_judge_canary_score_shift{{{J}}})",
                            "{{judge}}",
                        ),
                    ),
                ),
                PanelSpec(
                    "timeseries",
                    "Canary alarm and runs",
                    "1 while the canary's sequential test finds a judge calling more canary turns "
                    "severe; canary runs per hour, ok and failed (a failed run is never counted as "
                    "agreement).",
                    (
                        Query(
                            f"max by (judge) (casewatch_judge_canary_alarm{{{J}}})",
                            "{{judge}} alarm",
                        ),
                        Query(
                            "sum by (judge, outcome) "
                            f"(increase(casewatch_judge_canary_runs_total{{{J}}}[1h]))",
                            "{{judge}} {{outcome}} runs/h",
                        ),
                    ),
                ),
                PanelSpec(
                    "stat",
                    "Judge configurations in range",
                    "Distinct judge configuration hashes the replicas judged with over the range: "
                    "more than one means the judge configuration changed.",
                    (
                        Query(
                            "count(count by (config_hash) "
                            f"(max_over_time(casewatch_judge_config_info{RANGE})))",
                            "configurations",
                            True,
                        ),
                    ),
                ),
            ),
        ),
        # The review queue (monitor/jobs/review_queue.py): turns sent to people on the Label
        # Studio server and their annotations brought back as labels (docs/review-queue.md).
        RowSpec(
            "Review queue",
            (
                PanelSpec(
                    "timeseries",
                    "Review tasks queued and pushed",
                    "Turns queued for people per hour (severe: the judge called them severe; "
                    "uncertain: drawn with a known probability for the estimates) and tasks "
                    "created on the annotation server.",
                    (
                        Query(
                            "sum by (reason) (increase(casewatch_review_tasks_queued_total[1h]))",
                            "{{reason}} queued/h",
                        ),
                        Query(
                            "sum by (reason) (increase(casewatch_review_tasks_pushed_total[1h]))",
                            "{{reason}} pushed/h",
                        ),
                    ),
                ),
                PanelSpec(
                    "timeseries",
                    "Review backlog and server failures",
                    "Queued turns not pushed yet (they wait while the server is down or slow, "
                    "and are pushed when it answers), and failed calls to it per hour.",
                    (
                        Query("max(casewatch_review_backlog)", "backlog"),
                        Query(
                            "sum by (stage, reason) "
                            "(increase(casewatch_review_failures_total[1h]))",
                            "{{stage}} {{reason}}/h",
                        ),
                    ),
                ),
                PanelSpec(
                    "timeseries",
                    "Annotations pulled",
                    "Annotations brought back per hour: stored as human labels, or refused "
                    "with their reason (an unknown band or metric, unreadable, empty, a task "
                    "casewatch did not push).",
                    (
                        Query(
                            "sum by (outcome) (increase(casewatch_review_annotations_total[1h]))",
                            "{{outcome}}/h",
                        ),
                    ),
                ),
                PanelSpec(
                    "timeseries",
                    "Judge agreement with reviewers",
                    "Share of reviewed turns whose band (a metric's, or the turn's) the judge "
                    "had given, by the reviewers' consensus. Over the turns sent for review "
                    "(severe and unsure ones), so lower than on all traffic by design.",
                    (
                        Query(
                            f"max by (assistant, signal) (casewatch_review_agreement{{{A}}})",
                            "{{assistant}} {{signal}}",
                        ),
                    ),
                    unit="percentunit",
                    min=0,
                    max=1,
                ),
            ),
        ),
    ),
)

PIPELINE = DashboardSpec(
    uid="casewatch-pipeline",
    title="casewatch / Pipeline",
    description="The stream: intake, sampling, backpressure, lag, dead letters, storage, "
    "scheduled jobs and drift signals.",
    variables=(ASSISTANT,),
    rows=(
        RowSpec(
            "Intake and sampling",
            (
                PanelSpec(
                    "timeseries",
                    "Consumed per second",
                    "Records read from the broker, per topic.",
                    (
                        Query(
                            f"sum by (topic) (rate(casewatch_turns_consumed_total{RI}))",
                            "{{topic}}",
                        ),
                    ),
                    unit="reqps",
                ),
                PanelSpec(
                    "timeseries",
                    "Sampled per second by reason",
                    "Turns selected for judging: by sampling rate or an always-judge rule.",
                    (
                        Query(
                            "sum by (assistant, reason) "
                            f"(rate(casewatch_turns_sampled_total{{{A}}}{RI}))",
                            "{{assistant}} {{reason}}",
                        ),
                    ),
                    unit="reqps",
                    stacked=True,
                ),
                PanelSpec(
                    "timeseries",
                    "Skipped per second by reason",
                    "Valid turns not judged: sampled out, or the hourly budget exhausted.",
                    (
                        Query(
                            "sum by (assistant, reason) "
                            f"(rate(casewatch_turns_skipped_total{{{A}}}{RI}))",
                            "{{assistant}} {{reason}}",
                        ),
                    ),
                    unit="reqps",
                    stacked=True,
                ),
                PanelSpec(
                    "timeseries",
                    "Judge budget",
                    "The hourly judge budget summed over the replicas, per unit (calls, usd): "
                    "reserved by turns sampled and not yet judged, spent in the last hour, and "
                    "the limit. Reserved units return when a turn is judged, dropped at a "
                    "rebalance or abandoned at a stop; reserved staying high while little is "
                    "judged means turns are stuck behind the judge.",
                    (
                        Query(
                            "sum by (unit) (casewatch_judge_budget_reserved)",
                            "reserved {{unit}}",
                        ),
                        Query(
                            "sum by (unit) (casewatch_judge_budget_spent)",
                            "spent {{unit}}",
                        ),
                        Query(
                            "sum by (unit) (casewatch_judge_budget_limit)",
                            "limit {{unit}}",
                        ),
                        Query(
                            "sum by (unit) (casewatch_judge_budget_available)",
                            "available {{unit}}",
                        ),
                    ),
                ),
                PanelSpec(
                    "timeseries",
                    "Dead letters by reason",
                    "Records sent to the dead-letter topic: a producer shipping a bad schema "
                    "shows up here first. Below them, failed reads of record batches the "
                    "consumer cannot decompress or check (their partition is held, not "
                    "dead-lettered; runbook: CasewatchUnreadableBatches), and dead letters not "
                    "yet durable whose records are held uncommitted (refused, unavailable, "
                    "unacknowledged, backlog): a rising rate means the dead-letter topic cannot "
                    "be written.",
                    (
                        Query(
                            f"sum by (reason) (rate(casewatch_dead_letter_total{RI}))", "{{reason}}"
                        ),
                        Query(
                            "sum by (topic, reason) "
                            f"(rate(casewatch_unreadable_batches_total{RI}))",
                            "unreadable {{topic}} {{reason}}",
                        ),
                        Query(
                            f"sum by (why) (rate(casewatch_dead_letters_held_total{RI}))",
                            "held {{why}}",
                        ),
                    ),
                    unit="reqps",
                    stacked=True,
                ),
                PanelSpec(
                    "timeseries",
                    "Personal data redacted by kind",
                    "Values replaced by a placeholder before judging, storing or dead-lettering "
                    "(e-mail, phone, card, iban, secret, or an operator pattern's name). A kind "
                    "dropping to zero while traffic flows: check the redaction settings.",
                    (Query(f"sum by (kind) (rate(casewatch_redactions_total{RI}))", "{{kind}}"),),
                    unit="reqps",
                    stacked=True,
                ),
            ),
        ),
        RowSpec(
            "Backpressure and delivery",
            (
                PanelSpec(
                    "timeseries",
                    "Consumer lag",
                    "Records behind the end of each partition.",
                    (
                        Query(
                            "max by (topic, partition) (casewatch_consumer_lag)",
                            "{{topic}}/{{partition}}",
                        ),
                    ),
                ),
                PanelSpec(
                    "timeseries",
                    "Paused partitions and in-flight turns",
                    "Partitions paused because the judge queue is full, and turns consumed but "
                    "not finished.",
                    (
                        Query("sum(casewatch_paused_partitions)", "paused partitions"),
                        Query("sum(casewatch_in_flight)", "in flight"),
                    ),
                ),
                PanelSpec(
                    "timeseries",
                    "Offset commits and failures",
                    "Successful offset commits per topic, commits the broker refused, and "
                    "rejoins of a consumer group that did not form (left, joined dynamically).",
                    (
                        Query(
                            f"sum by (topic) (rate(casewatch_offsets_committed_total{RI}))",
                            "commits {{topic}}",
                        ),
                        Query(f"sum(rate(casewatch_commit_failures_total{RI}))", "failures"),
                        Query(
                            f"sum(rate(casewatch_consumer_group_rejoins_total{RI}))",
                            "group rejoins",
                        ),
                    ),
                    unit="reqps",
                ),
                PanelSpec(
                    "timeseries",
                    "Library fallbacks",
                    "Times /metrics switched from casewatch's fast renderer to the "
                    "prometheus_client encoder because an internal of the library was missing "
                    "(at start) or failed while rendering, and replicas whose Kafka client runs "
                    "a patch (an optimisation, a workaround) with kafka-python's own behaviour "
                    "instead, a private name it needs being missing. Scrapes and ingest keep "
                    "going; a non-zero value means the installed library differs from the one "
                    "casewatch pins (runbooks: CasewatchExpositionFallback, "
                    "CasewatchKafkaPatchFallback).",
                    (
                        Query(
                            "sum by (reason) (casewatch_exposition_fallback_total)",
                            "exposition {{reason}}",
                        ),
                        Query(
                            "sum by (patch) (casewatch_kafka_patch_fallback)",
                            "kafka {{patch}}",
                        ),
                    ),
                ),
                PanelSpec(
                    "timeseries",
                    "Verdicts stored",
                    "Verdict rows written (inserted) or recognised as replays (duplicate), and "
                    "failed writes (retried).",
                    (
                        Query(
                            f"sum by (outcome) (rate(casewatch_stored_total{RI}))",
                            "{{outcome}}",
                        ),
                        Query(f"sum(rate(casewatch_storage_errors_total{RI}))", "errors"),
                        Query(
                            f"sum(rate(casewatch_revoke_abandoned_total{RI}))",
                            "abandoned on revoke",
                        ),
                    ),
                    unit="reqps",
                ),
            ),
        ),
        RowSpec(
            "OpenTelemetry intake",
            (
                PanelSpec(
                    "timeseries",
                    "Traces being assembled",
                    "Traces and spans held while their turns are assembled from OTLP spans "
                    "(bounded by assembly.max_open_traces and max_open_spans); zero without an "
                    "otlp_proto or otlp_json topic.",
                    (
                        Query("sum(casewatch_open_traces)", "traces"),
                        Query("sum(casewatch_open_spans)", "spans"),
                    ),
                ),
                PanelSpec(
                    "timeseries",
                    "Traces finished by cause",
                    "What finished each trace: its root span, idle time, or a cap (a rising "
                    "cap rate means traces are cut short); with assembly.repartition, the "
                    "batch parts re-published keyed by trace id (failed: retried, held).",
                    (
                        Query(
                            f"sum by (cause) (rate(casewatch_traces_finished_total{RI}))",
                            "{{cause}}",
                        ),
                        Query(
                            f"sum by (outcome) (rate(casewatch_spans_repartitioned_total{RI}))",
                            "re-published {{outcome}}",
                        ),
                    ),
                    unit="reqps",
                    stacked=True,
                ),
                PanelSpec(
                    "timeseries",
                    "Evaluation records written back",
                    "gen_ai.evaluation.result log records per second by outcome; queue_full "
                    "and export_failed are records dropped (otel_export).",
                    (
                        Query(
                            f"sum by (outcome) (rate(casewatch_evaluation_records_total{RI}))",
                            "{{outcome}}",
                        ),
                    ),
                    unit="reqps",
                    stacked=True,
                    width=24,
                ),
            ),
        ),
        # --- outcomes ---
        RowSpec(
            "Outcome events",
            (
                PanelSpec(
                    "timeseries",
                    "Outcome events per hour",
                    "Feedback and case outcomes read: stored, duplicates (an id stored before) "
                    "and comments dropped (too large to redact); joined to their turn or case on "
                    "arrival, later, or expired (no turn within the join window: unknown ids); "
                    "and those waiting for their turn now. Malformed ones are dead letters.",
                    (
                        Query(
                            f"sum by (outcome) (increase(casewatch_outcome_events_total{RI}))",
                            "{{outcome}}",
                        ),
                        Query(
                            f"sum by (outcome) (increase(casewatch_outcome_joins_total{RI}))",
                            "joined {{outcome}}",
                        ),
                        Query("max(casewatch_outcomes_pending)", "pending"),
                    ),
                ),
                PanelSpec(
                    "timeseries",
                    "Unsampled turns kept, and judged for feedback",
                    "Unsampled turns kept for feedback-triggered judging (stored, dropped, "
                    "failed), and turns judged because of negative feedback by band (not in the "
                    "random sample's rates).",
                    (
                        Query(
                            f"sum by (outcome) (increase(casewatch_turns_retained_total{RI}))",
                            "kept {{outcome}}",
                        ),
                        Query(
                            "sum by (assistant, band) "
                            f"(increase(casewatch_feedback_judged_total{{{A}}}{RI}))",
                            "{{assistant}} {{band}}",
                        ),
                    ),
                ),
            ),
        ),
        # --- end outcomes ---
        RowSpec(
            "Jobs and drift",
            (
                PanelSpec(
                    "timeseries",
                    "Scheduled job runs",
                    "Runs per job and outcome (skipped: another replica holds the lease).",
                    (
                        Query(
                            f"sum by (job, outcome) (increase(casewatch_job_runs_total{RI}))",
                            "{{job}} {{outcome}}",
                        ),
                    ),
                    stacked=True,
                ),
                PanelSpec(
                    "stat",
                    "Since the last drift run",
                    "Seconds since the drift analysis last completed (the newest replica); no data "
                    "until it has run once.",
                    (
                        Query(
                            "time() - (max(casewatch_drift_last_run_timestamp_seconds) > 0)",
                            "drift",
                        ),
                    ),
                    unit="s",
                ),
                PanelSpec(
                    "table",
                    "Drift signals now",
                    "Per assistant and signal: detected (0/1), adjusted p-value and effect "
                    "size of the latest drift run.",
                    (
                        Query(
                            f"max by (assistant, signal) (casewatch_drift_detected{{{A}}})",
                            instant=True,
                        ),
                        Query(
                            f"max by (assistant, signal) (casewatch_drift_pvalue{{{A}}})",
                            instant=True,
                        ),
                        Query(
                            f"max by (assistant, signal) (casewatch_drift_effect{{{A}}})",
                            instant=True,
                        ),
                    ),
                    width=24,
                ),
                PanelSpec(
                    "timeseries",
                    "Drift p-values",
                    "Benjamini-Hochberg adjusted p-value per signal (lower = stronger "
                    "evidence of drift).",
                    (
                        Query(
                            f"max by (assistant, signal) (casewatch_drift_pvalue{{{A}}})",
                            "{{assistant}} {{signal}}",
                        ),
                    ),
                    min=0,
                    max=1,
                ),
                PanelSpec(
                    "timeseries",
                    "Drift window sizes",
                    "Judged turns in the recent and the reference window: tests need a "
                    "minimum count in both.",
                    (
                        Query(
                            f"max by (assistant, window) (casewatch_drift_window_turns{{{A}}})",
                            "{{assistant}} {{window}}",
                        ),
                    ),
                ),
                PanelSpec(
                    "timeseries",
                    "Failure modes",
                    "Per assistant and unit (turn: failed turns; case: failed cases), from the "
                    "newest failure-modes run: the size of each of the five largest modes (#1 "
                    "the largest; ids and labels: `casewatch inspect failures`, `--cases`), the "
                    "modes found, and the emerging ones (new or growing: "
                    "CasewatchNewFailureMode).",
                    (
                        Query(
                            f"max by (assistant, unit, rank) (casewatch_failure_mode_turns{{{A}}})",
                            "{{assistant}} {{unit}} #{{rank}}",
                        ),
                        Query(
                            f"max by (assistant, unit) (casewatch_failure_modes{{{A}}})",
                            "{{assistant}} {{unit}} modes",
                        ),
                        Query(
                            f"max by (assistant, unit) (casewatch_failure_modes_emerging{{{A}}})",
                            "{{assistant}} {{unit}} emerging",
                        ),
                    ),
                ),
                PanelSpec(
                    "timeseries",
                    "Failed turns grouped",
                    "The newest run's window, per unit (turn or case): failed turns or cases in "
                    "a mode, in none (unsorted) and past failure_modes.max_turns (over_cap, not "
                    "read); runs per hour that grouped or had too few to group; and groupings "
                    "per hour that fell back from the embeddings endpoint to TF-IDF text "
                    "features, by reason.",
                    (
                        Query(
                            "max by (assistant, unit, outcome) "
                            f"(casewatch_failure_mode_window_turns{{{A}}})",
                            "{{assistant}} {{unit}} {{outcome}}",
                        ),
                        Query(
                            "sum by (assistant, unit, outcome) "
                            f"(increase(casewatch_failure_mode_runs_total{{{A}}}[1h]))",
                            "{{assistant}} {{unit}} runs {{outcome}}",
                        ),
                        Query(
                            "sum by (reason) "
                            "(increase(casewatch_failure_mode_embedding_fallback_total[1h]))",
                            "embeddings fell back: {{reason}}",
                        ),
                    ),
                ),
            ),
        ),
    ),
)
