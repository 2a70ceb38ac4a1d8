"""alerts.runbookBaseUrl and alerts.grafanaUrl are rendered into the PrometheusRule's links,
exactly as ``rebase_links`` rewrites the shipped rules (one behaviour, two implementations)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from monitor.reports.alert_links import rebase_links
from tests.helm.chart import ROOT, one, render

RUNBOOK = "https://wiki.acme.test/ops/casewatch"
GRAFANA = "https://grafana.acme.test/"


def _shipped_groups(**bases: str) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = []
    for path in sorted(Path(ROOT / "rules").glob("*.yml")):
        groups += rebase_links(yaml.safe_load(path.read_text()), **bases)["groups"]
    return groups


def test_values_rebase_the_links() -> None:
    values = {"alerts": {"runbookBaseUrl": RUNBOOK, "grafanaUrl": GRAFANA}}
    rule = one(render(values, monitoring=True), "PrometheusRule")
    assert rule["spec"]["groups"] == _shipped_groups(
        runbook_base=RUNBOOK, grafana_url=GRAFANA.rstrip("/")
    )
    notes = [r["annotations"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
    assert all(n["runbook_url"].startswith(RUNBOOK + "/RUNBOOK") for n in notes)
    assert any(
        n.get("dashboard_url", "").startswith(
            "https://grafana.acme.test/d/casewatch-turns/casewatch-turns?var-assistant="
        )
        for n in notes
    )


def test_default_values_keep_the_rules_as_shipped() -> None:
    rule = one(render({}, monitoring=True), "PrometheusRule")
    assert rule["spec"]["groups"] == _shipped_groups()
