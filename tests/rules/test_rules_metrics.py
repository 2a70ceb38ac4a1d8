"""rules/casewatch.rules.yml reads only series the exporter declares (METRIC_NAMES), with
labels those series carry; every alert has its severity, annotations, a runbook section and
promtool tests that fire it and keep it silent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from monitor.metrics.exporter import HISTOGRAMS, METRIC_NAMES, is_declared
from tests.rules.markdown import anchors
from tests.rules.promql import (
    TARGET_LABELS,
    casewatch_series,
    exported_labels,
    recorded_series,
    selector_labels,
)

ROOT = Path(__file__).resolve().parents[2]
RUNBOOK_BASE = "https://github.com/casewatch/casewatch/blob/main/rules"  # alert_links.py
RULES = ROOT / "rules" / "casewatch.rules.yml"
RUNBOOK = ROOT / "rules" / "RUNBOOK.md"
TESTS = sorted((ROOT / "rules" / "tests").glob("*.test.yml"))


def rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def alerts() -> list[dict[str, Any]]:
    return [r for r in rules() if "alert" in r]


def test_the_helpers_see_names_not_strings() -> None:
    expr = (
        'sum by (assistant) (rate(casewatch_x_total{band="casewatch_fake",a=~"b"}[5m]))'
        " / a:casewatch_y:r"
    )
    assert casewatch_series(expr) == {"casewatch_x_total"}
    assert recorded_series(expr) == {"a:casewatch_y:r"}
    assert selector_labels(expr) == [("casewatch_x_total", {"band", "a"})]


def test_every_series_a_rule_reads_is_declared_by_the_exporter() -> None:
    read = set()
    for rule in rules():
        for name in casewatch_series(rule["expr"]):
            assert is_declared(name), f"{rule.get('alert') or rule['record']} reads {name}"
            read.add(name)
    # The rules cover the headline families (a rename in the exporter breaks this test).
    assert {"casewatch_turns_judged_total", "casewatch_drift_detected"} <= read
    assert "casewatch_turns_judged_total" in METRIC_NAMES


def test_label_matchers_name_labels_the_series_carries() -> None:
    labels = exported_labels()
    assert set(labels) >= {n for n in METRIC_NAMES if not n.endswith("_total")} - set(HISTOGRAMS)
    for rule in rules():
        for name, used in selector_labels(rule["expr"]):
            if ":" in name:
                continue
            unknown = used - labels[name] - TARGET_LABELS
            assert not unknown, f"{name} has no label {unknown}"


def test_every_recorded_series_an_expression_reads_is_recorded() -> None:
    recorded = {r["record"] for r in rules() if "record" in r}
    for rule in rules():
        for name in recorded_series(rule["expr"]):
            assert name in recorded, f"{rule.get('alert') or rule['record']} reads {name}"


def test_every_alert_has_severity_annotations_and_a_runbook_section() -> None:
    sections = anchors(RUNBOOK.read_text())
    names = [a["alert"] for a in alerts()]
    assert len(names) == len(set(names)) >= 13
    for alert in alerts():
        name = alert["alert"]
        assert alert["labels"]["severity"] in {"page", "ticket"}, name
        assert "for" in alert, f"{name}: say how long the condition must hold"
        notes = alert["annotations"]
        assert notes["summary"] and notes["description"], name
        assert notes["runbook_url"] == f"{RUNBOOK_BASE}/RUNBOOK.md#{name.lower()}"
        assert name.lower() in sections, f"RUNBOOK.md has no section for {name}"


@pytest.mark.parametrize("alert", [a["alert"] for a in alerts()])
def test_every_alert_has_a_firing_and_a_silent_promtool_case(alert: str) -> None:
    cases = [
        case
        for path in TESTS
        for group in yaml.safe_load(path.read_text())["tests"]
        for case in group.get("alert_rule_test", [])
        if case["alertname"] == alert
    ]
    assert any(case.get("exp_alerts") for case in cases), f"no test fires {alert}"
    assert any(not case.get("exp_alerts") for case in cases), f"no test keeps {alert} silent"
