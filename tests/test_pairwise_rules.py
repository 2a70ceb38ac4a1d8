"""rules/pairwise.rules.yml: promtool checks and unit tests, declared series only, every alert
with severity, annotations, a runbook section and a test that fires it and one that does not."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from monitor.metrics.exporter import is_declared

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "rules" / "pairwise.rules.yml"
TESTS = ROOT / "rules" / "tests" / "pairwise.test.yml"
RUNBOOK = ROOT / "rules" / "RUNBOOK.pairwise.md"


def run(promtool: Path, *args: str | Path) -> str:
    done = subprocess.run(
        [str(promtool), *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def test_promtool_checks_and_unit_tests_pass(promtool: Path) -> None:
    assert f"SUCCESS: {len(rules())} rules found" in run(promtool, "check", "rules", RULES)
    out = run(promtool, "test", "rules", TESTS)
    assert "SUCCESS" in out and "FAILED" not in out


def test_rules_read_only_declared_series() -> None:
    recorded = {r["record"] for r in rules() if "record" in r}
    level_metric_ops = r"\b[a-z_]+:casewatch_[a-z0-9_]+:[a-z0-9_]+"
    for rule in rules():
        for name in re.findall(level_metric_ops, rule["expr"]):
            assert name in recorded, f"{name} is recorded by no rule"
        plain = re.sub(level_metric_ops, "", rule["expr"])
        for name in re.findall(r"\bcasewatch_[a-z0-9_]+", plain):
            assert is_declared(name), f"{name} is not exported by monitor/metrics/exporter.py"


def test_every_alert_is_documented_and_tested_both_ways() -> None:
    runbook = RUNBOOK.read_text()
    anchors = {
        re.sub(r"[^\w\- ]", "", m.lower()).replace(" ", "-")
        for m in re.findall(r"^## (.+)$", runbook, re.M)
    }
    tests = yaml.safe_load(TESTS.read_text())["tests"]
    cases = [case for t in tests for case in t.get("alert_rule_test", [])]
    for alert in (r for r in rules() if "alert" in r):
        name = alert["alert"]
        assert alert["labels"]["severity"] in ("page", "ticket")
        assert {"summary", "description", "runbook_url"} <= set(alert["annotations"])
        assert alert["annotations"]["runbook_url"].split("#")[1] in anchors
        mine = [c for c in cases if c["alertname"] == name]
        assert any(c["exp_alerts"] for c in mine), f"no test fires {name}"
        assert any(not c["exp_alerts"] for c in mine), f"no test keeps {name} silent"
