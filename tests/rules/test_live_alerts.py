"""rules/ on live components: a real casewatch daemon (DaemonRunner: Kafka source from the
embedded Tansu broker, heuristic judge, SQLite store) scraped every second by Prometheus
(Debian's package) with rules/ loaded, alerting through Alertmanager to a webhook this test
owns.

The stream is examples/: two assistants, ``acme-support-stable`` and ``acme-support-canary``.
First only their flawless answers (flaws.jsonl ``flaw == "none"``); then the canary's answers
turn bad (its flawed answers, three times over with fresh event ids) while the stable stays
flawless. The severe-share page and the canary-vs-stable ticket must fire for the canary and
reach the webhook; nothing may fire for the stable, nor before the regression.

Honest about time: the rules are the production rules (windows, thresholds, objective and
volume guards unchanged) except that every ``for:`` is capped at 5 s
(``tune_rules(max_for_s=5)``), since a test cannot wait the production 2-15 minutes. The 1 h
and 6 h windows simply hold the minutes of data the test produced.
"""

from __future__ import annotations

from collections.abc import Callable
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

EXPECTED = {
    "CasewatchSevereShareBurnRateHigh",
    "CasewatchSevereShareBurnRateElevated",
    "CasewatchCanaryWorseThanStable",
}


@pytest.fixture
def daemon(start_daemon: Callable[..., DaemonRunner]) -> DaemonRunner:
    return start_daemon()


@pytest.mark.timeout(1500)  # its own condition deadlines (600 s each) bound it, not pytest's 300 s
def test_a_canary_regression_pages_through_alertmanager_and_the_stable_stays_silent(
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
    # The volume guards (30 judged turns an hour) hold for both from the first phase on.
    assert len(healthy[STABLE]) >= 30 and len(healthy[CANARY]) >= 30

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

        # Warm-up: one turn each, so that both assistants' band series exist (from 0) in
        # Prometheus before the stream: rate() cannot see increments made before a series'
        # first scrape, and all of phase 1 is judged within a scrape interval or two.
        bootstrap = tansu_broker.bootstrap
        warm_up = [healthy[STABLE][0], healthy[CANARY][0]]
        produce(bootstrap, kafka_topic, values(warm_up, "warm-up"))
        wait_for(lambda: judged() == len(warm_up), "the warm-up turns scraped", timeout=DEADLINE_S)

        # Phase 1: both assistants healthy.
        phase1 = healthy[STABLE] + healthy[CANARY]
        produce(bootstrap, kafka_topic, values(phase1, "p1"))
        # Every rule evaluated for 10 s (twice the capped `for:`) on all phase-1 verdicts.
        n1 = len(warm_up) + len(phase1)
        all_judged = f'sum(casewatch_turns_judged_total{{band!="judge_failed"}}) >= {n1}'
        settled = f"count_over_time(({all_judged})[10s:1s]) >= 10"
        wait_for(
            lambda: bool(stack.query(settled)), "phase 1 judged and evaluated", timeout=DEADLINE_S
        )
        assert judged() == n1
        burn = {
            s.labels["assistant"]: s.value
            for s in stack.query("assistant:casewatch_turns_severe:burnrate1h")
        }
        assert burn == {STABLE: 0.0, CANARY: 0.0}
        assert stack.alerts() == [] and alert_webhook.alerts() == []
        assert {r.health for r in stack.rules()} == {"ok"}

        # Phase 2: the canary's answers turn bad; the stable keeps answering well.
        # A tag per copy: one event id repeated would be judged once or more depending on
        # whether its copies overlap in flight (the store dedups judged ids), and the exact
        # count awaited below would hold only on an idle machine.
        canary_p2 = [v for copy in range(3) for v in values(flawed, f"p2-{copy}")]
        phase2 = canary_p2 + values(healthy[STABLE], "p2")
        produce(bootstrap, kafka_topic, phase2)
        for name in ("CasewatchSevereShareBurnRateHigh", "CasewatchCanaryWorseThanStable"):
            wait_for(
                lambda name=name: any(
                    a["labels"].get("assistant") == CANARY for a in alert_webhook.firing(name)
                ),
                f"{name} for the canary at the webhook",
                timeout=DEADLINE_S,
                explain=alert_webhook.alerts,
            )
        page = alert_webhook.firing("CasewatchSevereShareBurnRateHigh")[0]
        assert page["labels"]["severity"] == "page"
        assert page["annotations"]["runbook_url"].endswith("#casewatchsevereshareburnratehigh")
        wait_for(
            lambda: judged() == n1 + len(phase2), "phase 2 judged and scraped", timeout=DEADLINE_S
        )

        # What fired is the regression's alerts, for the canary only.
        active = stack.alerts()
        received = alert_webhook.alerts()
        for alert in [*(a.labels for a in active), *(a["labels"] for a in received)]:
            assert alert["alertname"] in EXPECTED, alert
            assert alert.get("assistant") == CANARY, alert
        assert {r.health for r in stack.rules()} == {"ok"}
