"""The drift alert on live components: a real casewatch daemon (DaemonRunner: Kafka source from
the embedded Tansu broker, heuristic judge, SQLite store) whose scheduler runs the real drift
job, scraped by Prometheus (Debian's package) with rules/ loaded, alerting through
Alertmanager to a webhook this test owns.

The drift job's windows are on the events' own timestamps, so the test writes history: the
reference window gets both assistants' flawless answers of examples/ stamped 30 minutes ago;
then the canary's flawed answers (twice over, fresh event ids) and the stable's flawless
ones arrive stamped now. ``CasewatchQualityDriftDetected`` must fire for the canary and reach
the webhook; no drift alert may fire for the stable (same answers in both windows).

Honest about time: rules are the production rules with every ``for:`` capped at 5 s
(``tune_rules(max_for_s=5)``); the drift job runs every 2 s over a 10-minute recent window and
the hour before it, with ``min_turns: 10`` (production: every 5 min, 1 h vs 7 days, 30 turns).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from consumers.tansu import EmbeddedBroker
from monitor.demo.prometheus_config import tune_rules
from monitor.demo.prometheus_stack import PrometheusStack
from monitor.stream.runner import DaemonRunner
from tests.fixtures.broker import produce
from tests.fixtures.prometheus import AlertWebhook
from tests.rules.live import CANARY, DEADLINE_S, RULES, STABLE, examples, values
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

DRIFT_ALERT = "CasewatchQualityDriftDetected"
MIN_TURNS = 10


@pytest.fixture
def daemon(start_daemon: Callable[..., DaemonRunner]) -> DaemonRunner:
    return start_daemon(
        drift={
            "enabled": True,
            "interval_seconds": 2.0,
            "recent_window_seconds": 600.0,
            "reference_window_seconds": 3600.0,
            "min_turns": MIN_TURNS,
        },
    )


@pytest.mark.timeout(3300)  # its own condition deadlines (5 x 600 s) bound it, not pytest's 300 s
def test_a_canary_regression_fires_the_drift_alert_through_alertmanager(
    prometheus_bins: None,
    tansu_broker: EmbeddedBroker,
    kafka_topic: str,
    daemon: DaemonRunner,
    alert_webhook: AlertWebhook,
    tmp_path: Path,
) -> None:
    rules = tmp_path / "casewatch.rules.yml"
    rules.write_text(yaml.safe_dump(tune_rules(yaml.safe_load(RULES.read_text()), max_for_s=5)))
    healthy, flawed = examples()
    assert min(len(healthy[STABLE]), len(healthy[CANARY]), len(flawed)) >= MIN_TURNS

    with PrometheusStack(
        [daemon.url],
        rule_files=[rules],
        webhook_url=alert_webhook.url,
        scrape_interval_s=1,
        evaluation_interval_s=1,
    ) as stack:

        def judged() -> float:
            return sum(
                s.value
                for s in stack.query('sum(casewatch_turns_judged_total{band!="judge_failed"})')
            )

        def drift_runs() -> float:
            return sum(s.value for s in stack.query("casewatch_drift_last_run_timestamp_seconds"))

        bootstrap = tansu_broker.bootstrap
        # The reference window: both assistants healthy, 30 minutes ago.
        reference = healthy[STABLE] + healthy[CANARY]
        past = datetime.now(UTC) - timedelta(minutes=30)
        produce(bootstrap, kafka_topic, values(reference, "ref", past))
        wait_for(
            lambda: judged() == len(reference),
            "the reference turns judged and scraped",
            timeout=DEADLINE_S,
        )
        # A drift run over the reference alone (nothing recent: insufficient data, no drift).
        first_run = time.time()
        wait_for(
            lambda: drift_runs() > first_run,
            "a drift run after the reference turns",
            timeout=DEADLINE_S,
        )
        assert not any(s.value for s in stack.query("casewatch_drift_detected"))

        # The recent window: the canary's answers turn bad, the stable keeps answering well.
        now = datetime.now(UTC)
        # Two copies of the flawed answers, each with its own event ids (a repeated id is a
        # duplicate delivery, judged at most once).
        recent = [
            *values(flawed, "p2-0", now),
            *values(flawed, "p2-1", now),
            *values(healthy[STABLE], "p2", now),
        ]
        produce(bootstrap, kafka_topic, recent)
        wait_for(
            lambda: any(
                a["labels"].get("assistant") == CANARY for a in alert_webhook.firing(DRIFT_ALERT)
            ),
            f"{DRIFT_ALERT} for the canary at the webhook",
            timeout=DEADLINE_S,
            explain=alert_webhook.alerts,
        )
        drift = alert_webhook.firing(DRIFT_ALERT)[0]
        assert drift["labels"]["severity"] == "ticket"
        assert drift["labels"]["signal"]
        assert drift["annotations"]["runbook_url"].endswith("#casewatchqualitydriftdetected")
        wait_for(
            lambda: judged() == len(reference) + len(recent),
            "the recent turns judged",
            timeout=DEADLINE_S,
        )
        # A drift run that saw every recent turn, and the rules evaluated after it.
        all_seen = time.time()
        wait_for(
            lambda: drift_runs() > all_seen,
            "a drift run over every recent turn",
            timeout=DEADLINE_S,
        )
        detected = {s.labels["assistant"] for s in stack.query("casewatch_drift_detected == 1")}
        assert detected == {CANARY}
        for alert in [
            *(a.labels for a in stack.alerts()),
            *(a["labels"] for a in alert_webhook.alerts()),
        ]:
            if alert["alertname"] == DRIFT_ALERT:
                assert alert.get("assistant") == CANARY, alert
        assert {r.health for r in stack.rules()} == {"ok"}
