"""The quality dashboards: the overview and the per-metric drill-down."""

from __future__ import annotations

from dashboards.model import (
    ASSISTANT,
    METRIC,
    OBJECTIVE,
    RANGE,
    RI,
    A,
    DashboardSpec,
    M,
    PanelSpec,
    Query,
    RowSpec,
    quantiles,
    share,
)

# The rules of rules/ are all named Casewatch*: other applications' alerts on a shared
# Prometheus stay off these panels.
CASEWATCH_ALERTS = 'alertname=~"Casewatch.+"'
# The severe share is the traffic's: each judged turn weighs 1/inclusion probability (the
# cascade draws unequally; under uniform sampling every weight is 1), as in rules/.
JUDGED_OK = f'casewatch_turns_judged_weight_total{{{A}, band!="judge_failed"}}'
SEVERE = f'casewatch_turns_judged_weight_total{{{A}, band="severe"}}'


OVERVIEW = DashboardSpec(
    uid="casewatch-overview",
    title="casewatch / Overview",
    description="Judged quality of each assistant: bands over time, S_final quantiles, the "
    "severe share against its objective, and the alerts Prometheus evaluates.",
    variables=(ASSISTANT, OBJECTIVE),
    rows=(
        RowSpec(
            "Quality",
            (
                PanelSpec(
                    "stat",
                    "Severe share, last hour",
                    "Share of judged turns whose turn band is severe over the last hour "
                    "(judge_failed turns excluded), each weighted by 1/its inclusion probability "
                    "(sampling.strategy: cascade; 1 under uniform sampling): the traffic's share.",
                    (Query(share(SEVERE, JUDGED_OK, "assistant", "[1h]"), "{{assistant}}", True),),
                    unit="percentunit",
                    width=8,
                    height=6,
                ),
                PanelSpec(
                    "stat",
                    "Judged turns per second",
                    "Turns scored by the judges, all bands.",
                    (
                        Query(
                            f"sum by (assistant) (rate(casewatch_turns_judged_total{{{A}}}{RI}))",
                            "{{assistant}}",
                        ),
                    ),
                    unit="reqps",
                    width=8,
                    height=6,
                ),
                PanelSpec(
                    "stat",
                    "Mean S_final, last hour",
                    "Mean weighted score of judged turns over the last hour.",
                    (
                        Query(
                            f"sum by (assistant) (rate(casewatch_score_final_sum{{{A}}}[1h]))\n/\n"
                            f"sum by (assistant) (rate(casewatch_score_final_count{{{A}}}[1h]))",
                            "{{assistant}}",
                            True,
                        ),
                    ),
                    unit="percentunit",
                    width=8,
                    height=6,
                    min=0,
                    max=1,
                ),
                PanelSpec(
                    "timeseries",
                    "Turns per band",
                    "Judged turns per second by turn band (the worse of band(S_final) and the "
                    "worst critical metric), and turns no judge could score (judge_failed).",
                    (
                        Query(
                            "sum by (assistant, band) "
                            f"(rate(casewatch_turns_judged_total{{{A}}}{RI}))",
                            "{{assistant}} {{band}}",
                        ),
                    ),
                    unit="reqps",
                    width=24,
                    stacked=True,
                ),
                PanelSpec(
                    "timeseries",
                    "S_final quantiles",
                    "p10 / p50 / p90 of S_final from the histogram (buckets at the band edges "
                    "0.3 / 0.6 / 0.85, so values are interpolated within a band).",
                    quantiles(f"casewatch_score_final_bucket{{{A}}}", "assistant", "{{assistant}}"),
                    unit="percentunit",
                    min=0,
                    max=1,
                ),
                PanelSpec(
                    "timeseries",
                    "Severe share vs objective",
                    "Severe share per assistant (over the rate interval; judged turns weighted "
                    "by 1/inclusion probability, as the burn-rate alerts weigh them) and the "
                    "objective of the burn-rate alerts ($objective): sustained time above the "
                    "line burns the error budget.",
                    (
                        Query(share(SEVERE, JUDGED_OK, "assistant"), "{{assistant}}"),
                        Query("vector($objective)", "objective"),
                    ),
                    unit="percentunit",
                    min=0,
                ),
            ),
        ),
        # --- detection ---
        RowSpec(
            "Regression detectors",
            (
                PanelSpec(
                    "timeseries",
                    "Detector statistic vs threshold",
                    "Sequential detectors (Bernoulli CUSUMs over 1.5x-5x shifts of the baseline "
                    "severe rate), per assistant and signal: the largest statistic as a fraction "
                    "of its threshold. At 1.0 CasewatchQualityRegressionDetected pages; the "
                    "threshold allows one false alarm per detection.false_alarm_days for the "
                    "whole deployment. 0 while a detector is not armed (see the table).",
                    (
                        Query(
                            f"max by (assistant, signal) (casewatch_detector_statistic{{{A}}})",
                            "{{assistant}} {{signal}}",
                        ),
                        Query("vector(1)", "threshold"),
                    ),
                    width=12,
                    min=0,
                ),
                PanelSpec(
                    "table",
                    "Detectors now",
                    "Per assistant and signal: armed (1: a baseline from enough reference "
                    "turns, or pinned; 0: not watched) and alarm (1: a regression is held until "
                    "the rate returns). `casewatch detect` prints baselines and change points.",
                    (
                        Query(
                            f"max by (assistant, signal) (casewatch_detector_armed{{{A}}})",
                            instant=True,
                        ),
                        Query(
                            f"max by (assistant, signal) (casewatch_detector_alarm{{{A}}})",
                            instant=True,
                        ),
                    ),
                    width=8,
                ),
                PanelSpec(
                    "stat",
                    "Since the last detection run",
                    "Seconds since the detection job last completed (the replica holding its "
                    "lease; it runs every detection.interval_seconds, 15 s by default).",
                    (
                        Query(
                            "time() - (max(casewatch_detector_last_run_timestamp_seconds) > 0)",
                            "detection",
                        ),
                    ),
                    unit="s",
                    width=4,
                ),
                PanelSpec(
                    "table",
                    "Failure modes since the change point",
                    "While a detector holds an alarm: the three largest failure modes among its "
                    "assistant's failed turns since the change point, as the newest failure-modes "
                    "run grouped them, by rank: each mode's number (`casewatch inspect failure "
                    "NUMBER` shows its turns) and its share of those turns. Empty while no "
                    "detector alarms; CasewatchQualityRegressionDetected names the same modes.",
                    (
                        Query(
                            "max by (assistant, signal, rank) "
                            f"(casewatch_failure_mode_since_change_id{{{A}}})",
                            instant=True,
                        ),
                        Query(
                            "max by (assistant, signal, rank) "
                            f"(casewatch_failure_mode_since_change_share{{{A}}})",
                            instant=True,
                        ),
                    ),
                    unit="none",
                    width=24,
                ),
            ),
        ),
        # --- end detection ---
        # --- outcomes ---
        RowSpec(
            "What customers said",
            (
                PanelSpec(
                    "timeseries",
                    "Negative feedback share",
                    "Share of the feedback users gave that was negative (thumbs down, or a "
                    "rating below the middle of its scale), on all traffic, sampled or not.",
                    (
                        Query(
                            share(
                                f'casewatch_outcomes_total{{{A}, kind="feedback_negative"}}',
                                f'casewatch_outcomes_total{{{A}, kind=~"feedback_.*"}}',
                                "assistant",
                                "[1h]",
                            ),
                            "{{assistant}}",
                        ),
                    ),
                    unit="percentunit",
                    width=8,
                    min=0,
                    max=1,
                ),
                PanelSpec(
                    "timeseries",
                    "Case outcomes per hour",
                    "Cases handed to a person, resolved and reopened, per hour.",
                    (
                        Query(
                            "sum by (assistant, kind) (increase(casewatch_outcomes_total"
                            f'{{{A}, kind=~"handed_off|resolved|reopened"}}[1h]))',
                            "{{assistant}} {{kind}}",
                        ),
                    ),
                    width=8,
                ),
                PanelSpec(
                    "timeseries",
                    "The judge against the users",
                    "Of the judged turns users were unhappy with, the share the judge passed "
                    "(minor or none: judge blind); and the share of all feedback-verdict pairs "
                    "where judge and user agree. The CasewatchJudgeBlind alert watches the "
                    "first over 6 h.",
                    (
                        Query(
                            share(
                                f'casewatch_judge_user_pairs_total{{{A}, agreement="judge_blind"}}',
                                f"casewatch_judge_user_pairs_total{{{A}, "
                                'agreement=~"judge_blind|agree_unhappy"}',
                                "assistant",
                                "[6h]",
                            ),
                            "{{assistant}} judge blind",
                        ),
                        Query(
                            share(
                                f"casewatch_judge_user_pairs_total{{{A}, "
                                'agreement=~"agree_unhappy|agree_happy"}',
                                f"casewatch_judge_user_pairs_total{{{A}, "
                                'agreement!="user_neutral"}',
                                "assistant",
                                "[6h]",
                            ),
                            "{{assistant}} agreement",
                        ),
                    ),
                    unit="percentunit",
                    width=8,
                    min=0,
                    max=1,
                ),
            ),
        ),
        # --- end outcomes ---
        RowSpec(
            "Alerts",
            (
                PanelSpec(
                    "table",
                    "Alerts now",
                    "casewatch alerts Prometheus evaluates now (pending or firing), from its "
                    "ALERTS series; rules/RUNBOOK.md has a section for each.",
                    (
                        Query(
                            "sum by (alertname, alertstate, severity, assistant) "
                            f"(ALERTS{{{CASEWATCH_ALERTS}}})",
                            instant=True,
                        ),
                    ),
                    width=12,
                ),
                PanelSpec(
                    "timeseries",
                    "Alerts over time",
                    "Pending and firing alerts by name.",
                    (
                        Query(
                            f"count by (alertname, alertstate) (ALERTS{{{CASEWATCH_ALERTS}}})",
                            "{{alertname}} {{alertstate}}",
                        ),
                    ),
                    width=12,
                    stacked=True,
                ),
            ),
        ),
        RowSpec(
            "Baseline tiers (DICE)",
            (
                PanelSpec(
                    "timeseries",
                    "Win rate against each baseline tier",
                    "Mean pairwise score of the assistant against the High, Medium and Low "
                    "baseline answers of the probe set in the last baseline_tiers run (ties "
                    "count half; 0.5 = as good as the tier).",
                    (
                        Query(
                            f"casewatch_baseline_win_rate{{{A}}}",
                            "{{assistant}} vs {{tier}}",
                        ),
                    ),
                    unit="percentunit",
                    min=0,
                    max=1,
                ),
                PanelSpec(
                    "timeseries",
                    "Losses against the Low tier",
                    "Answers judged worse than the Low baseline (a known bad answer) per "
                    "hour: should stay at zero.",
                    (
                        Query(
                            "sum by (assistant) (increase(casewatch_baseline_outcomes_total"
                            f'{{{A}, tier="low", outcome="loss"}}[1h]))',
                            "{{assistant}}",
                        ),
                    ),
                    min=0,
                ),
                PanelSpec(
                    "timeseries",
                    "Elo among the tiers",
                    "DICE Elo of the assistant after playing the Low, Medium and High "
                    "tiers from 1500 in each run.",
                    (Query(f"casewatch_elo_rating{{{A}}}", "{{assistant}}"),),
                ),
                PanelSpec(
                    "timeseries",
                    "Pairwise judge: position bias and confidence",
                    "Mean |score with the assistant shown first - shown second| (position "
                    "bias) and the share of decisions without logprobs (confidence unknown).",
                    (
                        Query(
                            f"casewatch_pairwise_position_disagreement{{{A}}}",
                            "{{assistant}} position disagreement",
                        ),
                        Query(
                            share(
                                f'casewatch_pairwise_confidence_total{{{A}, kind="unknown"}}',
                                f"casewatch_pairwise_confidence_total{{{A}}}",
                                "assistant",
                                "[6h]",
                            ),
                            "{{assistant}} unknown-confidence share",
                        ),
                    ),
                    unit="percentunit",
                    min=0,
                ),
            ),
        ),
        RowSpec(
            "Cases",
            (
                PanelSpec(
                    "timeseries",
                    "Cases judged by case band",
                    "Conversations judged as a whole once quiet (or ended), per hour, by case "
                    "band; judge_failed cases are retried at the next run (docs/cases.md).",
                    (
                        Query(
                            f"sum by (band) (increase(casewatch_cases_judged_total{{{A}}}[1h]))",
                            "{{band}}",
                        ),
                    ),
                    min=0,
                    stacked=True,
                ),
                PanelSpec(
                    "timeseries",
                    "Case severe share, resolution rate, median case score",
                    "Share of judged cases in the severe case band, of cases the case judge "
                    "read as resolved, and the median weighted case score, over the last 6 "
                    "hours.",
                    (
                        Query(
                            share(
                                f'casewatch_cases_judged_total{{{A}, band="severe"}}',
                                f'casewatch_cases_judged_total{{{A}, band!="judge_failed"}}',
                                "assistant",
                                "[6h]",
                            ),
                            "{{assistant}} severe",
                        ),
                        Query(
                            share(
                                f'casewatch_case_resolution_total{{{A}, outcome="resolved"}}',
                                f"casewatch_case_resolution_total{{{A}}}",
                                "assistant",
                                "[6h]",
                            ),
                            "{{assistant}} resolved",
                        ),
                        Query(
                            "histogram_quantile(0.5, sum by (le, assistant) "
                            f"(rate(casewatch_case_score_bucket{{{A}}}[6h])))",
                            "{{assistant}} median case score",
                        ),
                    ),
                    unit="percentunit",
                    min=0,
                    max=1,
                ),
                PanelSpec(
                    "timeseries",
                    "Case metrics: severe or moderate share",
                    "Per case metric (resolution, issue tracking, workflow alignment, "
                    "consistency, customer effort), the share of judged cases in the severe or "
                    "moderate band over the last 6 hours: which one drives a case regression.",
                    (
                        Query(
                            share(
                                f'casewatch_case_metric_band_total{{{A}, band=~"severe|moderate"}}',
                                f"casewatch_case_metric_band_total{{{A}}}",
                                "metric",
                                "[6h]",
                            ),
                            "{{metric}}",
                        ),
                    ),
                    unit="percentunit",
                    min=0,
                    max=1,
                ),
                PanelSpec(
                    "timeseries",
                    "Case judging: failures, skips and backlog",
                    "Case verdicts stored judge_failed by reason and closed cases a run did "
                    "not judge by reason (per hour), and the closed cases still waiting.",
                    (
                        Query(
                            "sum by (reason) (increase(casewatch_case_judge_failed_total[1h]))",
                            "failed: {{reason}}",
                        ),
                        Query(
                            "sum by (reason) (increase(casewatch_cases_skipped_total[1h]))",
                            "skipped: {{reason}}",
                        ),
                        Query("sum(casewatch_cases_pending)", "pending"),
                    ),
                    min=0,
                ),
            ),
        ),
    ),
)

# The per-metric shares are the traffic's too: each judged turn adds 1/inclusion probability to
# each of its metric bands (casewatch_metric_band_weight_total; 1 under uniform sampling), as in
# rules/ (assistant_metric:casewatch_metric_severe:ratio_rate*). The count of what was judged
# (casewatch_metric_band_total) is the volume behind them, on the bands table.
METRIC_BAND = f"casewatch_metric_band_weight_total{{{A}, {M}}}"
METRIC_BAD = f'casewatch_metric_band_weight_total{{{A}, {M}, band=~"severe|moderate"}}'
METRIC_JUDGED = f"casewatch_metric_band_total{{{A}, {M}}}"
WEIGHTED = (
    " Each judged turn weighs 1/its inclusion probability (sampling.strategy: cascade; 1 under "
    "uniform sampling): the traffic's share, not that of what was judged."
)

METRICS = DashboardSpec(
    uid="casewatch-metrics",
    title="casewatch / Metric drill-down",
    description="The eight metrics of the Case-Aware paper one by one: band rates, scores, and "
    "which metric drives a regression.",
    variables=(ASSISTANT, METRIC),
    rows=(
        RowSpec(
            "Which metric drives it",
            (
                PanelSpec(
                    "bargauge",
                    "Severe+moderate share by metric, last hour",
                    "Share of judged turns where the metric scored severe or moderate." + WEIGHTED,
                    (Query(share(METRIC_BAD, METRIC_BAND, "metric", "[1h]"), "{{metric}}", True),),
                    unit="percentunit",
                    min=0,
                    max=1,
                ),
                PanelSpec(
                    "bargauge",
                    "Shift: last hour minus the whole range",
                    "Severe+moderate share of the last hour minus that of the dashboard's time "
                    "range: the metric with the largest positive shift drives the regression."
                    + WEIGHTED,
                    (
                        Query(
                            f"({share(METRIC_BAD, METRIC_BAND, 'metric', '[1h]')})\n-\n"
                            f"({share(METRIC_BAD, METRIC_BAND, 'metric', RANGE)})",
                            "{{metric}}",
                            True,
                        ),
                    ),
                    unit="percentunit",
                ),
            ),
        ),
        # The judge checked against people (monitor/jobs/quality_estimate.py).
        RowSpec(
            "Severe rate corrected by human labels",
            (
                PanelSpec(
                    "timeseries",
                    "Severe rate: corrected, judge only, labels only (95 % interval)",
                    "From the newest labelled batch of each assistant (casewatch labels "
                    "export/import): the judge's severe rate corrected by the human labels "
                    "(prediction-powered inference, signal = metric or turn_band), next to the "
                    "judge-only and labels-only rates. A judge-only line outside the corrected "
                    "interval means the judge over- or under-calls. Empty until labels exist.",
                    (
                        Query(
                            f'casewatch_quality_estimate{{{A}, bound="point"}}',
                            "{{assistant}} {{signal}}",
                        ),
                        Query(
                            f'casewatch_quality_estimate{{{A}, bound=~"lower|upper"}}',
                            "{{assistant}} {{signal}} {{bound}}",
                        ),
                    ),
                    unit="percentunit",
                    width=12,
                    min=0,
                ),
                PanelSpec(
                    "timeseries",
                    "Severe rate corrected, valid at every look (read this one)",
                    "The same corrected rate as a running mean over every labelled batch of the "
                    "assistant, with bounds that hold at every look (an anytime-valid confidence "
                    "sequence): a dashboard re-reads the fixed-n interval at every refresh, which "
                    "it does not survive. Empty until labels exist.",
                    (
                        Query(
                            f'casewatch_quality_estimate_anytime{{{A}, bound="point"}}',
                            "{{assistant}} {{signal}}",
                        ),
                        Query(
                            f'casewatch_quality_estimate_anytime{{{A}, bound=~"lower|upper"}}',
                            "{{assistant}} {{signal}} {{bound}}",
                        ),
                    ),
                    unit="percentunit",
                    width=12,
                    min=0,
                ),
            ),
        ),
        RowSpec(
            "Band rates",
            (
                PanelSpec(
                    "timeseries",
                    "Severe share by metric",
                    "Share of judged turns with the metric in the severe band (0.00-0.30)."
                    + WEIGHTED,
                    (
                        Query(
                            share(
                                f'casewatch_metric_band_weight_total{{{A}, {M}, band="severe"}}',
                                METRIC_BAND,
                                "assistant, metric",
                            ),
                            "{{assistant}} {{metric}}",
                        ),
                    ),
                    unit="percentunit",
                    min=0,
                ),
                PanelSpec(
                    "timeseries",
                    "Moderate share by metric",
                    "Share of judged turns with the metric in the moderate band (0.31-0.60)."
                    + WEIGHTED,
                    (
                        Query(
                            share(
                                f'casewatch_metric_band_weight_total{{{A}, {M}, band="moderate"}}',
                                METRIC_BAND,
                                "assistant, metric",
                            ),
                            "{{assistant}} {{metric}}",
                        ),
                    ),
                    unit="percentunit",
                    min=0,
                ),
                PanelSpec(
                    "table",
                    "Bands per metric over the range",
                    "Judged turns per metric and band over the dashboard's time range: what "
                    "was judged, unweighted (the evidence behind the shares above).",
                    (
                        Query(
                            f"sum by (metric, band) (increase({METRIC_JUDGED}{RANGE}))",
                            instant=True,
                        ),
                    ),
                    width=24,
                ),
            ),
        ),
        RowSpec(
            "Scores",
            (
                PanelSpec(
                    "timeseries",
                    "Mean score by metric",
                    "Mean per-metric score of judged turns (0 worst, 1 best).",
                    (
                        Query(
                            f"sum by (metric) (rate(casewatch_metric_score_sum{{{A}, {M}}}{RI}))"
                            f"\n/\nsum by (metric) "
                            f"(rate(casewatch_metric_score_count{{{A}, {M}}}{RI}))",
                            "{{metric}}",
                        ),
                    ),
                    unit="percentunit",
                    min=0,
                    max=1,
                ),
                PanelSpec(
                    "timeseries",
                    "Median score by metric",
                    "p50 of each metric's score from its histogram.",
                    (
                        Query(
                            "histogram_quantile(0.5, sum by (le, metric) "
                            f"(rate(casewatch_metric_score_bucket{{{A}, {M}}}{RI})))",
                            "{{metric}}",
                        ),
                    ),
                    unit="percentunit",
                    min=0,
                    max=1,
                ),
                PanelSpec(
                    "timeseries",
                    "Judge disagreements by metric",
                    "Metrics whose bands differed between the two primary judges (panel mode "
                    "only): a metric that keeps splitting the judges is ill-defined.",
                    (
                        Query(
                            "sum by (metric) "
                            f"(rate(casewatch_disagreements_total{{{A}, {M}}}{RI}))",
                            "{{metric}}",
                        ),
                    ),
                    unit="reqps",
                    width=24,
                ),
            ),
        ),
        RowSpec(
            "Identifier tripwire",
            (
                PanelSpec(
                    "timeseries",
                    "Turns with a corrupted identifier, by kind",
                    "Share of consumed turns (sampled or not) whose answer nearly matches an "
                    "identifier of the evidence (a swapped digit, a mistyped key or host, two "
                    "swapped URL path segments), by identifier kind: the identifier tripwire "
                    "checks every turn at no judge cost, and the turns it catches are judged. "
                    "'checked only in part': turns larger than its bounds.",
                    (
                        Query(
                            "sum by (assistant, kind) "
                            f"(rate(casewatch_identifier_mismatch_total{{{A}}}{RI}))\n"
                            "/ ignoring (kind) group_left\nsum by (assistant) "
                            f"(rate(casewatch_tripwire_checked_total{{{A}}}{RI}))",
                            "{{assistant}} {{kind}}",
                        ),
                        # Turns larger than the tripwire's bounds, checked only in part.
                        Query(
                            "sum by (assistant) "
                            f"(rate(casewatch_tripwire_truncated_total{{{A}}}{RI}))\n"
                            "/ sum by (assistant) "
                            f"(rate(casewatch_tripwire_checked_total{{{A}}}{RI}))",
                            "{{assistant}} checked only in part",
                        ),
                    ),
                    unit="percentunit",
                    width=24,
                    min=0,
                ),
            ),
        ),
        RowSpec(
            "The cascade's cheap look",
            (
                PanelSpec(
                    "timeseries",
                    "Turns by the cheap look's band (sampling.strategy: cascade)",
                    "Share of consumed turns the cascade's cheap look (the offline judge, no "
                    "model) put in each band. It decides how likely a turn is to reach the LLM "
                    "judge, and it is not the LLM judge's rate: that is the weighted severe "
                    "share beside it (docs/cascade.md). No data under the uniform strategy.",
                    (
                        Query(
                            "sum by (assistant, cell) "
                            f"(rate(casewatch_cheap_look_turns_total{{{A}}}{RI}))\n"
                            "/ ignoring (cell) group_left\nsum by (assistant) "
                            f"(rate(casewatch_cheap_look_turns_total{{{A}}}{RI}))",
                            "{{assistant}} {{cell}}",
                        ),
                    ),
                    unit="percentunit",
                    width=12,
                    min=0,
                ),
                PanelSpec(
                    "timeseries",
                    "Judged turns the detectors left out (cascade)",
                    "Judged turns per second the sequential detectors did not observe, by "
                    "reason: under the cascade no_cell (judged before the switch, no cheap-look "
                    "cell stored) and cell_without_baseline (a cell the reference window holds "
                    "no turn of yet); every other drawn turn is observed by the cell-conditional "
                    "detectors. Under the uniform strategy, cascade_draw (a turn the cascade "
                    "drew).",
                    (
                        Query(
                            "sum by (assistant, reason) "
                            f"(rate(casewatch_detector_left_out_total{{{A}}}{RI}))",
                            "{{assistant}} {{reason}}",
                        ),
                    ),
                    unit="reqps",
                    width=12,
                    min=0,
                ),
            ),
        ),
    ),
)
