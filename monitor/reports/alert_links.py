"""The absolute links of the alert rules: where the runbook and Grafana live (pure; no I/O).

rules/*.yml ship with ``RUNBOOK_BASE`` (the runbook files of the upstream repository) and
``GRAFANA_URL`` (a Grafana on localhost:3000) in their ``runbook_url`` and ``dashboard_url``
annotations. A deployment points them at its own: the Helm chart replaces the two prefixes with
``alerts.runbookBaseUrl`` and ``alerts.grafanaUrl`` (templates/prometheusrule.yaml), anyone else
calls ``rebase_links``; the demo points the runbook at the checkout's own files and, having no
Grafana, the dashboard link at the dashboard's JSON file (``dashboards_as_files``).
"""

from __future__ import annotations

import copy
from typing import Any

RUNBOOK_BASE = "https://github.com/casewatch/casewatch/blob/main/rules"
GRAFANA_URL = "http://localhost:3000"
LINK_ANNOTATIONS = ("runbook_url", "dashboard_url")
DASHBOARD_NOTE = (
    "no Grafana runs here: dashboard_url is the dashboard's JSON file; import it in a Grafana "
    "(Dashboards > New > Import, see docs/dashboards.md) with this Prometheus as its data "
    "source, then pick the alert's assistant"
)


def _rebase(url: str, runbook_base: str | None, grafana_url: str | None) -> str:
    if runbook_base is not None and url.startswith(RUNBOOK_BASE + "/"):
        return runbook_base.rstrip("/") + url[len(RUNBOOK_BASE) :]
    if grafana_url is not None and url.startswith(GRAFANA_URL + "/"):
        return grafana_url.rstrip("/") + url[len(GRAFANA_URL) :]
    return url


def rebase_links(
    doc: dict[str, Any], *, runbook_base: str | None = None, grafana_url: str | None = None
) -> dict[str, Any]:
    """A copy of a rules document whose link annotations start with the given bases."""
    out = copy.deepcopy(doc)
    for group in out.get("groups", []):
        for rule in group.get("rules", []):
            notes = rule.get("annotations", {})
            for key in LINK_ANNOTATIONS:
                if isinstance(notes.get(key), str):
                    notes[key] = _rebase(notes[key], runbook_base, grafana_url)
    return out


def dashboards_as_files(doc: dict[str, Any], dashboards_base: str) -> dict[str, Any]:
    """A copy of a rules document whose Grafana dashboard links (``GRAFANA_URL/d/<uid>/…``)
    name the dashboard's JSON file, ``<dashboards_base>/<uid>.json``, with a
    ``dashboard_note`` on how to open it: for a machine with no Grafana (the demo), where the
    link would otherwise lead nowhere. The alert's filters (assistant, band) live in the
    dropped query string, hence the note."""
    out = copy.deepcopy(doc)
    prefix = GRAFANA_URL + "/d/"
    for group in out.get("groups", []):
        for rule in group.get("rules", []):
            notes = rule.get("annotations", {})
            url = notes.get("dashboard_url")
            if isinstance(url, str) and url.startswith(prefix):
                uid = url[len(prefix) :].split("/", 1)[0].split("?", 1)[0]
                notes["dashboard_url"] = f"{dashboards_base.rstrip('/')}/{uid}.json"
                notes["dashboard_note"] = DASHBOARD_NOTE
    return out
