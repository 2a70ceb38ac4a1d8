"""Reading the committed dashboards the way Grafana does: every panel's queries, with the
dashboard variables substituted, as PromQL Prometheus can run.

Shared by the unit tests (parse every query, check the metric names) and the live test (run
every query against a Prometheus scraping a real daemon)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD_DIR = ROOT / "dashboards"

# What Grafana substitutes for its built-in variables when the dashboard shows the last hour at
# the default resolution. ``$__rate_interval`` is at least four scrape intervals.
BUILTINS: dict[str, str] = {
    "__rate_interval": "1m",
    "__interval": "15s",
    "__range": "1h",
}
# "All" of a multi-value variable: its allValue (``.*``), regex-matched.
ALL = ".*"


@dataclass(frozen=True)
class PanelQuery:
    dashboard: str  # uid
    panel_id: int
    panel: str  # title
    ref_id: str
    expr: str
    instant: bool

    @property
    def where(self) -> str:
        return f"{self.dashboard} panel {self.panel_id} {self.panel!r} query {self.ref_id}"


def dashboard_files() -> list[Path]:
    """The Prometheus dashboards (casewatch-turns reads the SQL store: test_turns_dashboard.py)."""
    return sorted(p for p in DASHBOARD_DIR.glob("*.json") if p.name != "casewatch-turns.json")


def load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


def panels(doc: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, rows and panels nested in collapsed rows included."""
    for panel in doc.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def variables(doc: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in doc.get("templating", {}).get("list", [])}


def queries(doc: Mapping[str, Any]) -> Iterator[PanelQuery]:
    for panel in panels(doc):
        for target in panel.get("targets", []):
            yield PanelQuery(
                dashboard=doc["uid"],
                panel_id=panel["id"],
                panel=panel.get("title", ""),
                ref_id=target.get("refId", ""),
                expr=target["expr"],
                instant=bool(target.get("instant")),
            )


def default_values(doc: Mapping[str, Any]) -> dict[str, str]:
    """The value each dashboard variable takes when the dashboard opens: "All" (``.*``) for
    the multi-value query variables, a textbox's default, the datasource's name."""
    values = dict(BUILTINS)
    for name, var in variables(doc).items():
        if var["type"] == "query":
            values[name] = var.get("allValue") or ALL
        elif var["type"] == "textbox":
            values[name] = str(var["query"])
        elif var["type"] == "datasource":
            values[name] = "prometheus"
    return values


_VAR = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")


def substitute(expr: str, values: Mapping[str, str]) -> str:
    """``expr`` with ``$name``, ``${name}`` and ``[[name]]`` replaced; KeyError if a variable has
    no value (a query using a variable the dashboard does not define)."""

    def repl(m: re.Match[str]) -> str:
        name = next(g for g in m.groups() if g is not None)
        return values[name]

    return _VAR.sub(repl, expr)
