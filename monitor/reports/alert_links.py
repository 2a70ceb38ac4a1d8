"""The absolute links of the alert rules: where the runbook and Grafana live (pure; no I/O).

rules/*.yml ship with ``RUNBOOK_BASE`` (the runbook files of the upstream repository) and
``GRAFANA_URL`` (a Grafana on localhost:3000) in their ``runbook_url`` and ``dashboard_url``
annotations. A deployment points them at its own: the Helm chart replaces the two prefixes with
``alerts.runbookBaseUrl`` and ``alerts.grafanaUrl`` (templates/prometheusrule.yaml), anyone else
calls ``rebase_links``; the demo points the runbook at the checkout's own files.
"""

from __future__ import annotations

import copy
from typing import Any

RUNBOOK_BASE = "https://github.com/casewatch/casewatch/blob/main/rules"
GRAFANA_URL = "http://localhost:3000"
LINK_ANNOTATIONS = ("runbook_url", "dashboard_url")


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
