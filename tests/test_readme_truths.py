"""What the documentation states about the code is what the code does: figures, names and
defaults quoted in docs/ are checked against the code, so a change to one fails here until the
other follows."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from monitor.config.sampling import SamplingConfig
from monitor.jobs.baseline_tiers import JOB_NAME as BASELINE_JOB
from monitor.jobs.drift import DriftJob
from monitor.jobs.retention import RetentionJob
from monitor.jobs.rubric import RubricJob

ROOT = Path(__file__).resolve().parents[1]


def _page(name: str) -> str:
    return (ROOT / "docs" / name).read_text(encoding="utf-8")


def _panels(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for panel in doc.get("panels", []):
        if panel.get("type") == "row":
            out.extend(panel.get("panels", []))
        else:
            out.append(panel)
    return out


def test_the_dashboard_counts_are_the_committed_dashboards() -> None:
    per_file = {}
    for path in sorted((ROOT / "dashboards").glob("*.json")):
        panels = _panels(json.loads(path.read_text(encoding="utf-8")))
        per_file[path.name] = (len(panels), sum(len(p.get("targets", [])) for p in panels))
    total_panels = sum(p for p, _ in per_file.values())
    total_queries = sum(q for _, q in per_file.values())
    page = _page("dashboards.md")
    assert f"({total_panels} panels, {total_queries} queries)" in page
    for name, (panels, _) in per_file.items():
        row = re.search(rf"^\| `{re.escape(name)}` \|.*\| (\d+) \|$", page, re.M)
        assert row is not None, name
        assert int(row.group(1)) == panels, name


def test_metric_rows_stay_on_the_metrics_page() -> None:
    assert "\n| `casewatch_drift_" not in _page("alerts.md")  # a metrics-table row
    assert "`casewatch_drift_pvalue`" in _page("metrics.md")


def test_the_scheduled_jobs_section_names_jobs_that_exist() -> None:
    section = _page("storage.md").split("\n## Scheduled jobs\n", 1)[1].split("\n## ", 1)[0]
    assert "as they land" not in section
    for job in (RetentionJob.name, DriftJob.name, BASELINE_JOB, RubricJob.name):
        assert f"`{job}`" in section, job


def test_the_sampling_defaults_in_the_configuration_page_are_the_defaults() -> None:
    defaults = SamplingConfig()
    example = re.search(r"```yaml\n(.*?)```", _page("configuration.md"), re.S)
    assert example is not None
    text = example.group(1)
    assert f"default_rate: {defaults.default_rate}" in text
    assert f"budget_calls_per_hour: {defaults.budget_calls_per_hour:g}" in text
    assert f"budget_usd_per_hour: {defaults.budget_usd_per_hour}" in text
