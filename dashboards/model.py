"""The shape of a casewatch dashboard as plain data (no Grafana types), the variables the
dashboards share, and PromQL helpers.

``generate.py`` turns these specs into Grafana dashboard JSON with grafana-foundation-sdk. Every
query uses only metric names declared in ``monitor/metrics/exporter.py`` (``METRIC_NAMES``; a test
checks it) plus Prometheus' own ``ALERTS`` series, and the dashboard variables: ``$assistant``
(multi-value, regex-matched), ``$judge``, ``$metric``, ``$objective``, and Grafana's
``$__rate_interval`` / ``$__range``. Labels are the exporter's bounded ones; no ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

PanelKind = Literal["timeseries", "stat", "table", "bargauge", "piechart"]


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""
    instant: bool = False  # tables, stats over a range, bar gauges: one value per series


@dataclass(frozen=True)
class PanelSpec:
    kind: PanelKind
    title: str
    description: str
    queries: tuple[Query, ...]
    unit: str = "short"
    width: int = 12
    height: int = 8
    stacked: bool = False
    min: float | None = None
    max: float | None = None


@dataclass(frozen=True)
class RowSpec:
    title: str
    panels: tuple[PanelSpec, ...]


@dataclass(frozen=True)
class VariableSpec:
    """A query variable over one label (``label_values(metric, label)``), multi-value with
    "All" (matched as a regex ``.*`` so assistants that appear later are included); or, with
    ``textbox`` set, a free-text variable holding that default."""

    name: str
    label: str
    metric: str = ""
    textbox: str | None = None


@dataclass(frozen=True)
class DashboardSpec:
    uid: str
    title: str
    description: str
    rows: tuple[RowSpec, ...]
    variables: tuple[VariableSpec, ...] = field(default_factory=tuple)

    @property
    def panels(self) -> tuple[PanelSpec, ...]:
        return tuple(p for row in self.rows for p in row.panels)


ASSISTANT = VariableSpec("assistant", "Assistant", "casewatch_turns_judged_total")
JUDGE = VariableSpec("judge", "Judge", "casewatch_judge_requests_total")
METRIC = VariableSpec("metric", "Metric", "casewatch_metric_band_total")
# The severe-share objective the burn-rate alerts of rules/ are written against (the share of
# judged turns in the severe band an assistant may have); the overview draws it as a line.
OBJECTIVE = VariableSpec("objective", "Severe-share objective", textbox="0.05")

A = 'assistant=~"$assistant"'
J = 'judge=~"$judge"'
M = 'metric=~"$metric"'
RI = "[$__rate_interval]"
RANGE = "[$__range]"


def share(numerator: str, denominator: str, by: str, window: str = RI) -> str:
    """``sum by (by)(rate(num)) / sum by (by)(rate(den))`` over ``window``.

    A counter series appears only with its first event: an assistant that never had a severe
    turn has no ``band="severe"`` series at all. ``or 0 * den`` makes its share 0 instead of
    no data (which Grafana would draw as a gap, or "No data", for a perfectly healthy one).
    """
    den = f"sum by ({by}) (rate({denominator}{window}))"
    return f"(\n  sum by ({by}) (rate({numerator}{window}))\n  or 0 * {den}\n)\n/\n{den}"


def quantiles(bucket: str, by: str, legend: str) -> tuple[Query, ...]:
    return tuple(
        Query(
            f"histogram_quantile({q}, sum by (le, {by}) (rate({bucket}{RI})))",
            f"{legend} p{round(q * 100)}",
        )
        for q in (0.1, 0.5, 0.9)
    )
