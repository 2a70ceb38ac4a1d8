"""What `make run` shows of the alerting loop: the pure parts (the alerts line, finding
rules/), the demo without Prometheus (it runs and says how to get it), and the demo with
Prometheus and Alertmanager (Debian's packages): the demo's detectors are armed from the start,
and the injected canary regression makes the sequential detector's page
(CasewatchQualityRegressionDetected) fire for the canary before the severe-share burn-rate alert
goes pending, never for its stable sibling, and the periodic summary says so; the canary's
cases, judged whole once quiet, put the case page (CasewatchCaseSevereShareHigh) on its way."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from monitor.config.settings import load_settings
from monitor.demo.alerts import RULES, DemoAlerts, find_rules
from monitor.demo.options import DemoOptions
from monitor.demo.run import Demo
from monitor.demo.summary import AlertState, format_alerts
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[3]
DEADLINE_S = 240.0  # generous: a busy 2-core machine; the test ends as soon as it sees it
BURN = "CasewatchSevereShareBurnRateHigh"
DETECTOR = "CasewatchQualityRegressionDetected"
CASES = "CasewatchCaseSevereShareHigh"


def test_alerts_line_names_each_alert_once_by_state() -> None:
    alerts = [
        AlertState("B", "pending", "acme-canary"),
        AlertState("A", "firing"),
        AlertState("B", "pending", "acme-canary"),
        AlertState("B", "firing", "other"),
    ]
    assert format_alerts(alerts, "http://p:9/classic/alerts") == (
        "  alerts: firing A, B [other]; pending B [acme-canary]   (http://p:9/classic/alerts)"
    )
    assert format_alerts([], "http://p:9/alerts") == (
        "  alerts: none pending or firing   (http://p:9/alerts)"
    )


def test_rules_are_found_from_any_working_directory(tmp_path: Path) -> None:
    assert find_rules(cwd=tmp_path) == ROOT / RULES  # falls back to the checkout
    assert find_rules(tmp_path / "missing.yml") is None
    local = tmp_path / RULES
    local.parent.mkdir()
    local.write_text("groups: []\n")
    assert find_rules(cwd=tmp_path) == local


def test_without_binaries_or_rules_alerting_is_off_and_says_how_to_get_it(
    tmp_path: Path,
) -> None:
    missing = DemoAlerts(ROOT / RULES, prometheus_bin=tmp_path / "prometheus")
    line = missing.start("127.0.0.1:1")
    assert "not installed" in line and "`make services`" in line
    assert missing.summary() is None and missing.prometheus_url is None
    missing.kill()  # nothing to kill: no error
    missing.stop()
    assert "no rules/casewatch.rules.yml" in DemoAlerts(None).start("127.0.0.1:1")


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=30) as resp:  # noqa: S310 -- loopback
        return int(resp.status), resp.read()


@pytest.mark.integration
def test_every_link_the_demo_prints_for_its_prometheus_answers(
    prometheus_bins: None, tmp_path: Path
) -> None:
    """Debian's Prometheus serves only the classic UI (/alerts is a 404 there): the demo
    prints the pages its Prometheus answers, and its alerts link the checkout's own runbook."""
    alerts = DemoAlerts(ROOT / RULES)
    printed = alerts.start("127.0.0.1:1")  # no daemon needed: the pages, not the scrape
    try:
        assert alerts.stack is not None, printed
        links = re.findall(r"http://\S+", printed) + re.findall(
            r"\((http://\S+)\)", alerts.summary() or ""
        )
        ui = [link for link in links if link.startswith(alerts.stack.prometheus_url)]
        assert len(ui) == 3, printed  # the alerts page, the graph, the summary's alerts page
        for link in links:
            status, body = _get(link)
            assert status == 200 and body, link
        rules = json.loads(_get(f"{alerts.stack.prometheus_url}/api/v1/rules")[1])
        runbooks = [
            r["annotations"]["runbook_url"]
            for g in rules["data"]["groups"]
            for r in g["rules"]
            if r["type"] == "alerting"
        ]
        assert runbooks
        runbook = (ROOT / "rules" / "RUNBOOK.md").read_text()
        for url in runbooks:
            assert url.startswith((ROOT / "rules" / "RUNBOOK.md").as_uri() + "#"), url
            path = Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))
            assert path.read_text() == runbook
        # Every link any loaded rule carries answers on this machine: a file that exists in
        # the checkout (the demo runs no Grafana, so dashboards are their JSON files) or a page.
        notes = [r.get("annotations", {}) for g in rules["data"]["groups"] for r in g["rules"]]
        urls = [v for n in notes for v in n.values() if re.match(r"[a-z]+://", v)]
        dashboards = [n["dashboard_url"] for n in notes if "dashboard_url" in n]
        assert dashboards and len(urls) > len(runbooks)
        for url in urls:
            parts = urllib.parse.urlsplit(url)
            if parts.scheme == "file":
                path = Path(urllib.request.url2pathname(parts.path))
                assert path.is_file() and path.is_relative_to(ROOT), url
            else:
                status, body = _get(url)
                assert status == 200 and body, url
        for url in dashboards:
            path = Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))
            assert path.parent == ROOT / "dashboards", url
            assert json.loads(path.read_text())["uid"] == path.stem
        assert all("Import" in n["dashboard_note"] for n in notes if "dashboard_url" in n)
    finally:
        alerts.stop()


@pytest.mark.integration
def test_demo_without_prometheus_runs_and_says_how_to_get_it(
    tansu_broker: object, tmp_path: Path
) -> None:
    lines: list[str] = []
    options = DemoOptions(
        rate=100,
        port=0,
        db_path=tmp_path / "demo.db",
        summary_interval_s=0.5,
        prometheus_bin=tmp_path / "no-prometheus",
    )
    demo = Demo(load_settings(), options, registry=CollectorRegistry(), echo=lines.append)
    demo.start()
    try:
        assert demo.prometheus_url is None
        assert "`make services`" in lines[0]
        wait_for(lambda: demo.snapshot().judged > 0, "a judged turn", timeout=DEADLINE_S)
        assert "alerts:" not in demo.summary()  # no alerts line without Prometheus
    finally:
        demo.stop()
        demo.cleanup()


@pytest.mark.integration
def test_demo_shows_the_canary_regression_as_alerts(
    tansu_broker: object, prometheus_bins: None, tmp_path: Path
) -> None:
    lines: list[str] = []
    options = DemoOptions(
        rate=100,
        port=0,
        db_path=tmp_path / "demo.db",
        summary_interval_s=1.0,
        regression_after_s=5.0,
    )
    demo = Demo(load_settings(), options, registry=CollectorRegistry(), echo=lines.append)
    demo.start()
    runner = threading.Thread(target=demo.run, daemon=True)
    runner.start()
    try:
        url = demo.prometheus_url
        assert url is not None and f"Prometheus {url}/" in lines[0]
        page = re.search(r"Prometheus (\S+) with", lines[0])
        assert page is not None and page.group(1).endswith("/alerts")
        assert "regression: acme-support-canary starts healthy" in lines[0]
        assert "detectors: armed at once on baselines pinned from one healthy loop" in lines[0]
        deadline = time.monotonic() + DEADLINE_S
        seen: dict[tuple[str, str | None, str], int] = {}  # first poll showing each alert state
        polls = 0
        canary, stable = "acme-support-canary", "acme-support-stable"
        # The canary's cases turn bad too: judged as whole conversations once quiet, a
        # quarter of them severe puts the case page on its way (its `for:` runs 5 minutes).
        while (
            (DETECTOR, canary, "firing") not in seen
            or not any(k[:2] == (BURN, canary) for k in seen)
            or not any(k[:2] == (CASES, canary) for k in seen)
        ):
            assert time.monotonic() < deadline, f"{seen}\n" + "\n".join(lines[-5:])
            assert runner.is_alive(), "\n".join(lines)
            polls += 1
            for a in demo.alert_states():
                seen.setdefault((a.name, a.assistant, a.state), polls)
            time.sleep(0.5)
        assert demo.regressed
        # The detector's page fires before the burn-rate page can (its `for: 2m` has not run).
        burn_fired = seen.get((BURN, canary, "firing"))
        assert burn_fired is None or seen[(DETECTOR, canary, "firing")] < burn_fired
        wanted = f"{BURN} [{canary}]"
        while not any(wanted in line for line in lines):  # the summary says so too
            assert time.monotonic() < deadline, "\n".join(lines[-5:])
            time.sleep(0.5)
        assert f"({page.group(1)})" in next(line for line in lines if wanted in line)
        # The healthy sibling pages for nothing at any point.
        assert not any(k[:2] in ((BURN, stable), (DETECTOR, stable)) for k in seen)
        for name in (BURN, DETECTOR):
            assert not any(f"{name} [{stable}]" in line for line in lines)
    finally:
        demo.request_stop()
        runner.join(120)
        demo.cleanup()
    assert not runner.is_alive()
    assert demo.prometheus_url is None  # stopped with the demo
