"""The Prometheus + Alertmanager launcher on the real binaries (Debian's packages).

A stack scrapes a real exporter (prometheus_client's HTTP server over a fresh registry), loads
a rule file, evaluates an alert and delivers it through Alertmanager to a webhook the test
owns; stopping it ends both processes and removes their directory. Missing binaries are a
clear error naming ``make services``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry, Counter, start_http_server

from monitor.demo.prometheus_api import Sample
from monitor.demo.prometheus_process import find_binary
from monitor.demo.prometheus_stack import PrometheusStack
from monitor.errors import ConfigError, PrometheusNotInstalled, PrometheusStackError
from tests.fixtures.prometheus import AlertWebhook
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def exporter() -> Iterator[tuple[str, Counter]]:
    registry = CollectorRegistry()
    counter = Counter("casewatch_probe_things", "things", ["kind"], registry=registry)
    counter.labels(kind="a").inc(3)
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        yield f"http://127.0.0.1:{server.server_port}", counter
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_missing_binaries_say_how_to_install_them(tmp_path: Path) -> None:
    with pytest.raises(PrometheusNotInstalled, match=r"run `make services`"):
        find_binary(tmp_path / "prometheus")
    stack = PrometheusStack(["127.0.0.1:1"], prometheus_bin=tmp_path / "nope")
    with pytest.raises(PrometheusNotInstalled, match="nope is missing"):
        stack.start()
    assert not stack.running


def test_bad_arguments_are_rejected_before_starting(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one scrape target"):
        PrometheusStack([])
    with pytest.raises(ConfigError, match="does not exist"):
        PrometheusStack(["127.0.0.1:1"], rule_files=[tmp_path / "missing.yml"])
    with pytest.raises(PrometheusStackError, match="not started"):
        _ = PrometheusStack(["127.0.0.1:1"]).prometheus_url


def test_stack_scrapes_evaluates_rules_and_delivers_alerts(
    prometheus_bins: None,
    exporter: tuple[str, Counter],
    alert_webhook: AlertWebhook,
    tmp_path: Path,
) -> None:
    target, counter = exporter
    rules = tmp_path / "probe.rules.yml"
    rule_doc = {
        "groups": [
            {
                "name": "probe",
                "rules": [
                    {
                        "record": "kind:things:sum",
                        "expr": "sum by (kind) (casewatch_probe_things_total)",
                    },
                    {
                        "alert": "ProbeThingsSeen",
                        "expr": 'kind:things:sum{kind="b"} > 0',
                        "labels": {"severity": "ticket"},
                        "annotations": {"summary": "things of kind b"},
                    },
                ],
            }
        ]
    }
    rules.write_text(yaml.safe_dump(rule_doc))
    stack = PrometheusStack([target], rule_files=[rules], webhook_url=alert_webhook.url)
    with stack:
        workdir = stack.workdir
        url = stack.prometheus_url
        assert stack.running and workdir.is_dir()
        assert stack.start().prometheus_url == url  # starting again keeps the running pair
        wait_for(stack.targets_up, "the target scraped", explain=alert_webhook.alerts)
        wait_for(
            lambda: [s.value for s in stack.query('kind:things:sum{kind="a"}')] == [3.0],
            "the recording rule evaluated",
            explain=alert_webhook.alerts,
        )
        assert stack.query("2") == [Sample({}, 2.0)]  # a scalar result
        assert {(r.name, r.health) for r in stack.rules()} == {
            ("kind:things:sum", "ok"),
            ("ProbeThingsSeen", "ok"),
        }
        assert stack.alerts() == [] and alert_webhook.alerts() == []

        counter.labels(kind="b").inc()  # now the alert's condition holds
        wait_for(
            lambda: bool(alert_webhook.firing("ProbeThingsSeen")),
            "the alert delivered",
            explain=alert_webhook.alerts,
        )
        (alert,) = alert_webhook.firing("ProbeThingsSeen")
        assert alert["labels"]["severity"] == "ticket"
        assert alert["annotations"]["summary"] == "things of kind b"
        assert [a.name for a in stack.alerts()] == ["ProbeThingsSeen"]
        assert [a.state for a in stack.alertmanager_alerts()] == ["active"]
        with pytest.raises(PrometheusStackError, match="parse error"):
            stack.query("sum(")
    assert not stack.running and not workdir.exists()
    stack.stop()  # idempotent
