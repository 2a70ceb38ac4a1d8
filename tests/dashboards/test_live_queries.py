"""Every query of every committed dashboard returns data from a real Prometheus scraping a real
daemon (DESIGN.md: "the test fails on an empty result").

The daemon is ``DaemonRunner`` (what ``casewatch run`` runs) on a topic of the embedded Tansu
broker, fed by the demo's replay producer with the example turns of ``examples/`` in a loop (the
canary's flawed answers included) and the demo's malformed records (dead letters). Its judge
panel is the offline heuristic judge and a judge on the fake OpenAI-compatible server (so
tokens, dollars, retries and failures exist), with an arbiter on the same server; half of the
conversations are sampled (so ``skipped`` exists) plus an always-judge rule; the retention job
runs every second (so ``casewatch_job_runs_total`` exists). Prometheus (Debian's package, via
``monitor.demo.prometheus_stack``) scrapes it every second with ``rules/`` loaded.

Each query runs with the dashboard's variables at their defaults ("All" for the multi-value
ones, whose label_values queries must themselves return values), and those using
``$assistant`` again with one assistant picked (the canary), ``$__rate_interval`` = 1m and
``$__range`` = 1h: range queries over the last minutes, instant ones now. A query passes when it
returns at least one finite value; the test waits (with a deadline) until all pass, then names
any that never did.

Excluded, each for a reason the test states:
- the drift panels, while the daemon has no drift job (``monitor/jobs/build.py`` builds none
  for these settings): their series appear only after a drift run. With a drift job the test
  runs it every few seconds (``run_once``) and the drift p-value and effect queries count a
  NaN series as data (NaN is the exporter's insufficient_data, all a few minutes of traffic
  against an empty reference window can give).
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from consumers.tansu import EmbeddedBroker, create_topics
from monitor.config.settings import Settings, load_settings
from monitor.demo.examples import find_examples, load_examples
from monitor.demo.producer import ReplayProducer
from monitor.demo.prometheus_stack import PrometheusStack
from monitor.schema.turn import METRICS
from monitor.stream.runner import DaemonRunner
from tests.dashboards.queries import (
    ROOT,
    PanelQuery,
    dashboard_files,
    default_values,
    load,
    queries,
    substitute,
    variables,
)
from tests.fake_judge_server import (
    FakeJudgeServer,
    Reply,
    case_data_of,
    content,
    malformed,
    scores,
)
from tests.fixtures.broker import DLQ_SUFFIX
from tests.fixtures.judge_server import fake_judge_config
from tests.support.cases import case_reply_text

pytestmark = pytest.mark.integration

DEADLINE_S = 600.0  # generous: a busy 2-core machine; the test ends as soon as all pass
RANGE_S = 300.0  # range queries look at the last five minutes
STEP_S = 5.0

DRIFT_SERIES = (
    "casewatch_drift_pvalue",
    "casewatch_drift_effect",
    "casewatch_drift_detected",
    "casewatch_drift_window_turns",
    "casewatch_drift_last_run_timestamp_seconds",
)
# NaN is what the drift gauges hold for insufficient_data (monitor/metrics/exporter.py), which is
# what
# a few minutes of traffic against an empty reference window gives: a series counts as data.
NAN_MEANS_INSUFFICIENT = ("casewatch_drift_pvalue", "casewatch_drift_effect")
DRIFT_EXCLUSION = "needs a drift run, and the daemon schedules no drift job (monitor/jobs/build.py)"
DRIFT_RUN_EVERY_S = 5.0
# The failure-mode series appear once the failure_modes job has run over failed turns; with
# the job scheduled (the default) the test runs it every few seconds, as it runs drift's.
FAILURE_MODE_SERIES = ("casewatch_failure_mode",)
FAILURE_MODE_EXCLUSION = (
    "needs a failure_modes run, and the daemon schedules no failure_modes job "
    "(monitor/jobs/build.py)"
)
# The embeddings fallback counter exists only with failure_modes.embeddings configured (an
# embeddings endpoint), which these settings have none of; its path is tested against a fake
# endpoint in tests/monitor/jobs/test_failure_modes_cases.py.
EMBEDDINGS_SERIES = ("casewatch_failure_mode_embedding_fallback",)
EMBEDDINGS_EXCLUSION = "needs failure_modes.embeddings, and these settings configure none"
# The baseline-tier row needs the baseline_tiers job, which judges probes against assistant
# endpoints; these settings configure none, so the job is absent (it has live tests of its own
# in tests/monitor/jobs/test_baseline_tiers*.py).
BASELINE_SERIES = (
    "casewatch_baseline_",
    "casewatch_elo_rating",
    "casewatch_pairwise_",
)
BASELINE_EXCLUSION = "needs a baseline_tiers run, and these settings configure no assistant probes"
# The corrected rate needs human labels of a batch (tests/monitor/jobs/
# test_quality_estimate.py exports and reads the gauges); the live daemon has none.
QUALITY_ESTIMATE_EXCLUSION = (
    "needs human labels (casewatch labels import), which the test has none of"
)
# The canary's agreement and shift come from a run over a canary set (labelled turns, or
# judge_canary.file); tests/monitor/jobs/test_judge_canary.py exports and reads them.
CANARY_SERIES = ("casewatch_judge_canary_agreement", "casewatch_judge_canary_score_shift")
CANARY_EXCLUSION = "needs a judge canary set (labelled turns or judge_canary.file): none here"
# Traces finished and evaluation records written back need an OpenTelemetry topic and an
# otel_export endpoint; tests/monitor/stream/test_daemon_otel.py exports and reads them.
OTEL_SERIES = (
    "casewatch_traces_finished_total",
    "casewatch_spans_repartitioned_total",
    "casewatch_evaluation_records_total",
)
OTEL_EXCLUSION = "needs an OTLP topic and otel_export, which the live daemon has none of"
# Outcome events need a topic of kind outcomes and a producer of feedback;
# tests/monitor/stream/test_daemon_outcomes.py exports and reads them.
OUTCOME_SERIES = (
    "casewatch_outcomes_total",
    "casewatch_judge_user_pairs_total",
    "casewatch_outcome_events_total",
    "casewatch_outcome_joins_total",
    "casewatch_outcomes_pending",
    "casewatch_turns_retained_total",
    "casewatch_feedback_judged_total",
)
OUTCOME_EXCLUSION = "needs an outcomes topic with feedback, which the live daemon has none of"
# The judge's agreement with reviewers needs annotations pulled from a Label Studio server;
# tests/monitor/jobs/test_review_queue.py exports and reads it against the real server.
REVIEW_SERIES = ("casewatch_review_agreement",)
REVIEW_EXCLUSION = "needs annotations from a review queue server, which the live daemon has none of"
# The cheap look runs only under sampling.strategy: cascade (the live daemon samples uniformly);
# tests/monitor/stream/steps/test_sample_cascade.py exports and reads it.
CASCADE_SERIES = ("casewatch_cheap_look_turns_total", "casewatch_detector_left_out_total")
CASCADE_EXCLUSION = "needs sampling.strategy: cascade, and the live daemon samples uniformly"
# The failure modes since a change point exist only while a detector holds an alarm
# (tests/monitor/jobs/test_detection_failure_modes.py exports and reads them); the live
# daemon's detectors do not alarm within the test.
SINCE_CHANGE_SERIES = ("casewatch_failure_mode_since_change_",)
SINCE_CHANGE_EXCLUSION = "needs a detector in alarm, which the live daemon has none of"
# Queries run with every variable at "All", and those using $assistant again with this one
# picked (an assistant of examples/ whose flawed answers make the judges disagree).
PICKED_ASSISTANT = "acme-support-canary"

# A rule of the test's own, loaded beside rules/ (named like them, so the panels' alertname
# filter keeps it): the ALERTS panels are proven against a live ALERTS series whichever
# casewatch alerts the example traffic happens to trigger.
ALWAYS_PENDING = {
    "groups": [
        {
            "name": "dashboard-test",
            "rules": [
                {
                    "alert": "CasewatchDashboardTestAlwaysPending",
                    "expr": "vector(1)",
                    "for": "1h",
                    "labels": {"severity": "info"},
                    "annotations": {"summary": "keeps ALERTS non-empty for the dashboard test"},
                }
            ],
        }
    ]
}


def _respond_factory() -> Any:
    """judge-a scores 0.9 everywhere, so it disagrees with the heuristic judge on flawed
    answers; the arbiter then scores 0.25, so the median of the three is the heuristic judge's
    score and flawed answers end severe. Except: queries in one bucket always get truncated
    JSON (judge_failed, invalid_output, after a retry) and those of another get it once (a
    retry, then valid scores)."""
    attempts: dict[str, int] = {}

    def respond(request: dict[str, Any]) -> Reply:
        data = case_data_of(request) or {}
        if "turns" in data:  # a whole case (the case job): a valid case judgment
            return content(case_reply_text(0.9 if request["model"] == "judge-a" else 0.25))
        query = str(data.get("query", ""))
        if request["model"] == "judge-arbiter":
            return scores(0.25)
        bucket = sum(query.encode()) % 7
        attempts[query] = attempts.get(query, 0) + 1
        if bucket == 0 or (bucket == 1 and attempts[query] % 2 == 1):
            return malformed()
        return scores({m: 0.9 for m in METRICS})

    return respond


def _settings(tmp_path: Path, bootstrap: str, topic: str, judge: FakeJudgeServer) -> Settings:
    priced = {
        "transport_retries": 0,
        "output_retries": 1,
        "price_input_per_mtok": 1.0,
        "price_output_per_mtok": 2.0,
    }
    return load_settings(
        None,
        judges={
            "judge-a": fake_judge_config(judge, model="judge-a", **priced),
            "judge-arbiter": fake_judge_config(judge, model="judge-arbiter", **priced),
        },
        panel={"primaries": ["heuristic", "judge-a"], "arbiter": "judge-arbiter"},
        kafka={
            "bootstrap_servers": [bootstrap],
            "topics": [topic],
            "group_id": f"dashboards-{uuid.uuid4().hex[:8]}",
            "session_timeout_ms": 6000,
            "heartbeat_interval_ms": 1000,
            "max_poll_interval_ms": 6000,
        },
        sampling={
            "default_rate": 0.5,
            "always_judge": [{"name": "error_code", "field": "answer", "pattern": r"\bE\d{4}\b"}],
        },
        storage={
            "url": f"sqlite:///{tmp_path / 'casewatch.db'}",
            "retention_days": 30,
            "retention_interval_seconds": 1,
        },
        server={"host": "127.0.0.1", "port": 0},
        # Cases close two seconds after their last turn, so the case panels have data.
        cases={"idle_seconds": 2, "interval_seconds": 1, "lookback_seconds": 3600},
    )


@pytest.fixture
def live_stack(
    tansu_broker: EmbeddedBroker, prometheus_bins: None, tmp_path: Path
) -> Iterator[tuple[PrometheusStack, DaemonRunner]]:
    topic = f"dash.{uuid.uuid4().hex[:10]}"
    create_topics(tansu_broker.bootstrap, [topic], 2, dlq_suffix=DLQ_SUFFIX)
    extra_rules = tmp_path / "always-pending.yml"
    extra_rules.write_text(yaml.safe_dump(ALWAYS_PENDING))
    rule_files = [*sorted((ROOT / "rules").glob("*.yml")), extra_rules]
    with FakeJudgeServer(responder=_respond_factory()) as judge:
        settings = _settings(tmp_path, tansu_broker.bootstrap, topic, judge)
        runner = DaemonRunner(settings, CollectorRegistry()).start()
        producer = ReplayProducer(
            tansu_broker.bootstrap, topic, load_examples(find_examples()), rate=40.0
        ).start()
        stack = PrometheusStack([runner.url], rule_files=rule_files, scrape_interval_s=1.0)
        try:
            stack.start()
            yield stack, runner
        finally:
            stack.stop()
            producer.stop()
            runner.stop(60.0)


def _excluded(query: PanelQuery, job_names: list[str]) -> str | None:
    if any(name in query.expr for name in SINCE_CHANGE_SERIES):
        return SINCE_CHANGE_EXCLUSION
    if "drift" not in job_names and any(name in query.expr for name in DRIFT_SERIES):
        return DRIFT_EXCLUSION
    if any(n in query.expr for n in EMBEDDINGS_SERIES):
        return EMBEDDINGS_EXCLUSION
    if "failure_modes" not in job_names and any(n in query.expr for n in FAILURE_MODE_SERIES):
        return FAILURE_MODE_EXCLUSION
    if "baseline_tiers" not in job_names and any(n in query.expr for n in BASELINE_SERIES):
        return BASELINE_EXCLUSION
    if "casewatch_quality_estimate" in query.expr:
        return QUALITY_ESTIMATE_EXCLUSION
    if any(name in query.expr for name in CANARY_SERIES):
        return CANARY_EXCLUSION
    if any(name in query.expr for name in OTEL_SERIES):
        return OTEL_EXCLUSION
    if any(name in query.expr for name in OUTCOME_SERIES):
        return OUTCOME_EXCLUSION
    if any(name in query.expr for name in REVIEW_SERIES):
        return REVIEW_EXCLUSION
    if any(name in query.expr for name in CASCADE_SERIES):
        return CASCADE_EXCLUSION
    return None


def _has_data(stack: PrometheusStack, expr: str, instant: bool) -> bool:
    """At least one finite value (any value, NaN included, for the drift gauges whose NaN
    means insufficient data); an invalid query raises (PrometheusStackError)."""
    nan_ok = any(name in expr for name in NAN_MEANS_INSUFFICIENT)

    def data(values: list[float]) -> bool:
        return bool(values) if nan_ok else any(math.isfinite(v) for v in values)

    if instant:
        return data([s.value for s in stack.query(expr)])
    now = time.time()
    series = stack.query_range(expr, now - RANGE_S, now, STEP_S)
    return any(data([v for _, v in points]) for _, points in series)


@pytest.mark.timeout(1500)  # its own condition deadlines (600 s each) bound it, not pytest's 300 s
def test_every_dashboard_query_returns_data_from_a_live_daemon(
    live_stack: tuple[PrometheusStack, DaemonRunner],
) -> None:
    stack, runner = live_stack
    job_names = runner._jobs.job_names if runner._jobs is not None else []
    docs = [load(p) for p in dashboard_files()]
    pending: dict[str, tuple[str, bool]] = {}
    excluded: dict[str, str] = {}
    for doc in docs:
        values = default_values(doc)
        for query in queries(doc):
            reason = _excluded(query, job_names)
            if reason is not None:
                excluded[query.where] = reason
                continue
            pending[query.where] = (substitute(query.expr, values), query.instant)
            if "$assistant" in query.expr:  # and as when one assistant is picked
                one = {**values, "assistant": PICKED_ASSISTANT}
                where = f"{query.where} [assistant={PICKED_ASSISTANT}]"
                pending[where] = (substitute(query.expr, one), query.instant)
    label_queries = {
        f"{doc['uid']} variable {name}": var["query"]
        for doc in docs
        for name, var in variables(doc).items()
        if var["type"] == "query"
    }
    total = len(pending)
    assert total >= 60, f"only {total} queries found in {len(docs)} dashboards"

    deadline = time.monotonic() + DEADLINE_S
    next_drift = next_modes = time.monotonic()
    while pending or label_queries:
        if "drift" in job_names and time.monotonic() >= next_drift and runner._jobs is not None:
            runner._jobs.run_once("drift")  # its own interval may be long: run it now
            next_drift = time.monotonic() + DRIFT_RUN_EVERY_S
        if "failure_modes" in job_names and time.monotonic() >= next_modes and runner._jobs:
            runner._jobs.run_once("failure_modes")  # its interval is 15 minutes: run it now
            next_modes = time.monotonic() + DRIFT_RUN_EVERY_S
        for where, (expr, instant) in list(pending.items()):
            if _has_data(stack, expr, instant):
                del pending[where]
        for where, query in list(label_queries.items()):
            metric, label = query.removeprefix("label_values(").rstrip(")").split(", ")
            if stack.query(f"count by ({label}) ({metric})"):
                del label_queries[where]
        if not (pending or label_queries) or time.monotonic() > deadline:
            break
        time.sleep(1.0)

    assert not label_queries, f"variables without values: {sorted(label_queries)}"
    assert not pending, (
        f"{len(pending)} of {total} dashboard queries returned no data within {DEADLINE_S:g} s:\n"
        + "\n".join(f"  {w}: {e}" for w, (e, _) in sorted(pending.items()))
    )
    # Every exclusion is a job's (only while that job is not scheduled) or the OTLP intake's.
    assert set(excluded.values()) <= {
        DRIFT_EXCLUSION, BASELINE_EXCLUSION, QUALITY_ESTIMATE_EXCLUSION, CANARY_EXCLUSION,
        OTEL_EXCLUSION, OUTCOME_EXCLUSION, CASCADE_EXCLUSION, FAILURE_MODE_EXCLUSION,
        REVIEW_EXCLUSION, SINCE_CHANGE_EXCLUSION, EMBEDDINGS_EXCLUSION,
    }  # fmt: skip
    if "drift" in job_names:
        assert DRIFT_EXCLUSION not in excluded.values()
