"""The alerts' links are absolute and resolve: runbook sections that exist, and for the
quality alerts the turns dashboard filtered to the alert's assistant with variables the
dashboard has. ``rebase_links`` moves both to a deployment's own hosts."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import yaml

from monitor.reports.alert_links import (
    GRAFANA_URL,
    RUNBOOK_BASE,
    dashboards_as_files,
    rebase_links,
)
from tests.rules.markdown import anchors

ROOT = Path(__file__).resolve().parents[2]
RULE_FILES = sorted((ROOT / "rules").glob("*.rules.yml"))
QUALITY_ALERTS = {
    "CasewatchSevereShareBurnRateHigh", "CasewatchSevereShareBurnRateElevated",
    "CasewatchCanaryWorseThanStable", "CasewatchQualityDriftDetected",
    "CasewatchQualityRegressionDetected",
}  # fmt: skip


def _alerts() -> list[dict[str, object]]:
    return [
        rule
        for path in RULE_FILES
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
        if "alert" in rule
    ]


def test_every_runbook_url_is_absolute_and_names_an_existing_section() -> None:
    for alert in _alerts():
        url = alert["annotations"]["runbook_url"]  # type: ignore[index]
        assert url.startswith(RUNBOOK_BASE + "/"), url
        file, anchor = url[len(RUNBOOK_BASE) + 1 :].split("#")
        assert anchor in anchors((ROOT / "rules" / file).read_text()), url


def test_quality_alerts_link_to_the_turns_dashboard_filtered_to_their_assistant() -> None:
    doc = json.loads((ROOT / "dashboards" / "casewatch-turns.json").read_text())
    names = {v["name"] for v in doc["templating"]["list"]}
    linked = {a["alert"] for a in _alerts() if "dashboard_url" in a["annotations"]}  # type: ignore[operator]
    assert linked == QUALITY_ALERTS
    for alert in _alerts():
        url = alert["annotations"].get("dashboard_url")  # type: ignore[attr-defined]
        if url is None:
            continue
        parts = urlsplit(url)
        assert f"{parts.scheme}://{parts.netloc}" == GRAFANA_URL
        assert parts.path == f"/d/{doc['uid']}/casewatch-turns"
        query = parse_qs(parts.query)
        assert query["var-assistant"] == ["{{ $labels.assistant | urlquery }}"]
        assert {k.removeprefix("var-") for k in query if k.startswith("var-")} <= names
        assert query["var-band"][0] == "severe" and query["from"][0].startswith("now-")


def test_rebase_links_moves_both_bases_and_nothing_else() -> None:
    doc = yaml.safe_load(RULE_FILES[0].read_text())
    moved = rebase_links(doc, runbook_base="https://wiki.acme.test/casewatch/",
                         grafana_url="https://grafana.acme.test")  # fmt: skip
    notes = [r["annotations"] for g in moved["groups"] for r in g["rules"] if "alert" in r]
    assert all(
        n["runbook_url"].startswith("https://wiki.acme.test/casewatch/RUNBOOK") for n in notes
    )
    dashboards = [n["dashboard_url"] for n in notes if "dashboard_url" in n]
    assert dashboards and all(
        u.startswith("https://grafana.acme.test/d/casewatch-turns/") for u in dashboards
    )
    assert rebase_links(doc) == doc


def test_dashboards_as_files_names_each_dashboards_json_file_with_a_note() -> None:
    """Without a Grafana (the demo) the dashboard link is the dashboard's file, which exists."""
    doc = yaml.safe_load(RULE_FILES[0].read_text())
    moved = dashboards_as_files(doc, (ROOT / "dashboards").as_uri() + "/")
    notes = [r["annotations"] for g in moved["groups"] for r in g["rules"] if "alert" in r]
    linked = [n for n in notes if "dashboard_url" in n]
    assert linked
    for n in linked:
        path = Path(urlsplit(n["dashboard_url"]).path)
        assert path == ROOT / "dashboards" / "casewatch-turns.json", n["dashboard_url"]
        assert "no Grafana" in n["dashboard_note"]
    assert all(n["runbook_url"].startswith(RUNBOOK_BASE) for n in notes)  # untouched
    assert not any("dashboard_note" in n for n in notes if "dashboard_url" not in n)
