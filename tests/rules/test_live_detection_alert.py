"""The regression detector's page on live components: a real casewatch daemon (DaemonRunner:
Kafka source from the embedded Tansu broker, heuristic judge, SQLite store) whose scheduler runs
the real detection job on its lease, scraped by Prometheus (Debian's package) with rules/
loaded, alerting through Alertmanager to a webhook this test owns.

The detectors' baselines come from the events' own timestamps: the reference window gets both
assistants' flawless answers of examples/ stamped 30 minutes ago; the detectors arm on them.
Then the canary's flawed answers (three copies, fresh event ids) and the stable's flawless ones
arrive stamped now. ``CasewatchQualityRegressionDetected`` must reach the webhook for the canary
with its annotations (baseline rate, rate since the change point, start), and the stable's
detectors must stay quiet.

Honest about scale: the job runs every second with a 1-hour reference window ending 5 minutes
ago, 10 reference turns to arm and a false-alarm budget of one per day (production: every 15 s,
7 days ending an hour ago, 500 turns, one per 30 days); the rules are the production rules.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from consumers.tansu import EmbeddedBroker
from monitor.demo.prometheus_stack import PrometheusStack
from monitor.stream.runner import DaemonRunner
from tests.fixtures.broker import produce
from tests.fixtures.prometheus import AlertWebhook
from tests.rules.live import CANARY, DEADLINE_S, RULES, STABLE, examples, values
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

ALERT = "CasewatchQualityRegressionDetected"


@pytest.fixture
def daemon(start_daemon: Callable[..., DaemonRunner]) -> DaemonRunner:
    return start_daemon(
        detection={
            "interval_seconds": 1.0,
            "reference_window_seconds": 3600.0,
            "reference_gap_seconds": 300.0,
            "baseline_refresh_seconds": 2.0,
            "min_reference_turns": 10,
            "false_alarm_days": 1.0,
        },
    )


@pytest.mark.timeout(3300)  # its own condition deadlines (600 s each) bound it, not pytest's 300 s
def test_a_canary_regression_pages_through_alertmanager_and_the_stable_stays_quiet(
    prometheus_bins: None,
    tansu_broker: EmbeddedBroker,
    kafka_topic: str,
    daemon: DaemonRunner,
    alert_webhook: AlertWebhook,
) -> None:
    healthy, flawed = examples()
    with PrometheusStack(
        [daemon.url],
        rule_files=[RULES],
        webhook_url=alert_webhook.url,
        scrape_interval_s=1,
        evaluation_interval_s=1,
    ) as stack:

        def judged() -> float:
            return sum(
                s.value
                for s in stack.query('sum(casewatch_turns_judged_total{band!="judge_failed"})')
            )

        def armed(assistant: str) -> bool:
            q = f'min(casewatch_detector_armed{{assistant="{assistant}"}})'
            return any(s.value == 1 for s in stack.query(q))

        bootstrap = tansu_broker.bootstrap
        reference = healthy[STABLE] + healthy[CANARY]
        past = datetime.now(UTC) - timedelta(minutes=30)
        produce(bootstrap, kafka_topic, values(reference, "ref", past))
        wait_for(
            lambda: judged() == len(reference),
            "the reference turns judged and scraped",
            timeout=DEADLINE_S,
        )
        wait_for(
            lambda: armed(CANARY) and armed(STABLE), "every detector armed", timeout=DEADLINE_S
        )
        assert not stack.query("casewatch_detector_alarm == 1")

        now = datetime.now(UTC)
        recent = [
            *(v for i in range(3) for v in values(flawed, f"bad-{i}", now)),
            *values(healthy[STABLE], "now", now),
        ]
        produce(bootstrap, kafka_topic, recent)
        wait_for(
            lambda: any(
                a["labels"].get("assistant") == CANARY
                and a["labels"].get("signal") == "turn_severe"
                for a in alert_webhook.firing(ALERT)
            ),
            f"{ALERT} for the canary's severe turns at the webhook",
            timeout=DEADLINE_S,
            explain=alert_webhook.alerts,
        )
        page = next(
            a for a in alert_webhook.firing(ALERT) if a["labels"]["signal"] == "turn_severe"
        )
        assert page["labels"]["severity"] == "page"
        notes = page["annotations"]
        assert notes["runbook_url"].endswith("#casewatchqualityregressiondetected")
        assert notes["baseline_rate"].endswith("%") and notes["rate_since_change"].endswith("%")
        baseline = float(notes["baseline_rate"].rstrip("%"))
        since = float(notes["rate_since_change"].rstrip("%"))
        assert since > 2 * baseline, notes
        assert notes["started"].startswith(str(now.year)), notes

        wait_for(
            lambda: judged() == len(reference) + len(recent),
            "the recent turns judged",
            timeout=DEADLINE_S,
        )
        last = max(s.value for s in stack.query("casewatch_detector_last_run_timestamp_seconds"))
        wait_for(
            lambda: (
                max(s.value for s in stack.query("casewatch_detector_last_run_timestamp_seconds"))
                > last + 2
            ),
            "detection runs after every recent turn was judged",
            timeout=DEADLINE_S,
        )
        alarmed = {s.labels["assistant"] for s in stack.query("casewatch_detector_alarm == 1")}
        assert alarmed == {CANARY}
        stable_stat = stack.query(f'max(casewatch_detector_statistic{{assistant="{STABLE}"}})')
        assert stable_stat and stable_stat[0].value < 1.0
        for alert in [
            *(a.labels for a in stack.alerts()),
            *(a["labels"] for a in alert_webhook.alerts()),
        ]:
            if alert["alertname"] == ALERT:
                assert alert.get("assistant") == CANARY, alert
        assert {r.health for r in stack.rules()} == {"ok"}
