"""Writes the Grafana dashboards of ``dashboards/*.json`` from ``dashboards/specs.py``.

    python -m dashboards.generate          # rewrite the JSON files
    python -m dashboards.generate --check  # exit 1 if a committed file differs

The JSON files are what users import (Grafana: Dashboards > New > Import, or file/sidecar
provisioning); this generator only keeps them consistent. It uses grafana-foundation-sdk, Grafana
Labs' dashboards-as-code library (pinned in the ``dev`` extra to its Grafana 11.6 build, whose
dashboards have schemaVersion 41; Grafana's later schema migrations, 42 and 43, touch field
overrides and transformations these dashboards do not use, so newer Grafana imports them as is).

Each dashboard has a ``datasource`` variable (type datasource, Prometheus) that every panel and
variable query uses, so the JSON works with file and sidecar provisioning too (``__inputs`` /
``${DS_PROMETHEUS}`` is only resolved by the interactive import). Panel ids are unique per
dashboard and stable (assigned in order), uids are fixed, time is UTC.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar

from grafana_foundation_sdk.builders import bargauge, piechart, prometheus, stat, table, timeseries
from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as common_m
from grafana_foundation_sdk.models import dashboard as dash_m

from dashboards.model import DashboardSpec, PanelSpec, VariableSpec
from dashboards.specs import DASHBOARDS

OUT_DIR = Path(__file__).resolve().parent
DATASOURCE = dash_m.DataSourceRef(type_val="prometheus", uid="${datasource}")
REF_IDS = "ABCDEFGHIJ"


class _PanelBuilder(Protocol):
    def id(self, id_val: int) -> Self: ...
    def title(self, title: str) -> Self: ...
    def description(self, description: str) -> Self: ...
    def datasource(self, datasource: dash_m.DataSourceRef) -> Self: ...
    def with_target(self, target: Any) -> Self: ...
    def unit(self, unit: str) -> Self: ...
    def min(self, min_val: float) -> Self: ...
    def max(self, max_val: float) -> Self: ...
    def height(self, h: int) -> Self: ...
    def span(self, w: int) -> Self: ...
    def build(self) -> dash_m.Panel: ...


P = TypeVar("P", bound=_PanelBuilder)


def _common(builder: P, spec: PanelSpec, panel_id: int) -> P:
    b = (
        builder.id(panel_id)
        .title(spec.title)
        .description(spec.description)
        .datasource(DATASOURCE)
        .unit(spec.unit)
        .height(spec.height)
        .span(spec.width)
    )
    if spec.min is not None:
        b = b.min(spec.min)
    if spec.max is not None:
        b = b.max(spec.max)
    for ref_id, q in zip(REF_IDS, spec.queries, strict=False):
        target = (
            prometheus.Dataquery()
            .expr(q.expr)
            .ref_id(ref_id)
            .datasource(DATASOURCE)
            .legend_format(q.legend or "__auto")
        )
        if q.instant:
            target = target.instant()
            if spec.kind == "table":
                target = target.format(_table_format())
        else:
            target = target.range()
        b = b.with_target(target)
    return b


def _table_format() -> Any:
    from grafana_foundation_sdk.models.prometheus import PromQueryFormat

    return PromQueryFormat.TABLE


def _last() -> common_b.ReduceDataOptions:
    return common_b.ReduceDataOptions().calcs(["lastNotNull"]).values(False)


def build_panel(spec: PanelSpec, panel_id: int) -> _PanelBuilder:
    if len(spec.queries) > len(REF_IDS):
        raise ValueError(f"panel {spec.title!r}: at most {len(REF_IDS)} queries")
    if spec.kind == "timeseries":
        ts = timeseries.Panel().fill_opacity(20 if spec.stacked else 5)
        if spec.stacked:
            ts = ts.stacking(common_b.StackingConfig().mode(common_m.StackingMode.NORMAL))
        legend = (
            common_b.VizLegendOptions()
            .display_mode(common_m.LegendDisplayMode.TABLE)
            .placement(common_m.LegendPlacement.BOTTOM)
            .show_legend(True)
            .calcs(["mean", "lastNotNull"])
        )
        return _common(ts.legend(legend), spec, panel_id)
    if spec.kind == "stat":
        return _common(stat.Panel().reduce_options(_last()), spec, panel_id)
    if spec.kind == "bargauge":
        gauge = (
            bargauge.Panel()
            .reduce_options(_last())
            .orientation(common_m.VizOrientation.HORIZONTAL)
            .display_mode(common_m.BarGaugeDisplayMode.GRADIENT)
        )
        return _common(gauge, spec, panel_id)
    if spec.kind == "piechart":
        return _common(piechart.Panel().reduce_options(_last()), spec, panel_id)
    if spec.kind == "table":
        # Instant table queries return one frame per query: merge them into one table.
        t = table.Panel()
        t = t.with_transformation(dash_m.DataTransformerConfig(id_val="merge", options={}))
        return _common(t, spec, panel_id)
    raise ValueError(f"unknown panel kind {spec.kind!r}")


def build_variable(spec: VariableSpec) -> Any:
    if spec.textbox is not None:
        return (
            dash_b.TextBoxVariable(spec.name)
            .label(spec.label)
            .default_value(spec.textbox)
            .current(dash_m.VariableOption(text=spec.textbox, value=spec.textbox, selected=True))
        )
    return (
        dash_b.QueryVariable(spec.name)
        .label(spec.label)
        .datasource(DATASOURCE)
        .query(f"label_values({spec.metric}, {spec.name})")
        .refresh(dash_m.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(dash_m.VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .all_value(".*")
        .current(dash_m.VariableOption(text="All", value="$__all", selected=True))
    )


def build_dashboard(spec: DashboardSpec) -> dict[str, Any]:
    builder = (
        dash_b.Dashboard(spec.title)
        .uid(spec.uid)
        .description(spec.description)
        .tags(["casewatch"])
        .timezone("utc")
        .time("now-6h", "now")
        .refresh("30s")
        .tooltip(dash_m.DashboardCursorSync.CROSSHAIR)
        .link(
            dash_b.DashboardLink("casewatch")
            .type(dash_m.DashboardLinkType.DASHBOARDS)
            .tags(["casewatch"])
            .as_dropdown(True)
            .include_vars(True)
            .keep_time(True)
        )
        .with_variable(
            dash_b.DatasourceVariable("datasource")
            .label("Data source")
            .type("prometheus")
            .current(dash_m.VariableOption(text="default", value="default", selected=True))
        )
    )
    for var in spec.variables:
        builder = builder.with_variable(build_variable(var))
    panel_id = 0
    for row in spec.rows:
        panel_id += 1
        builder = builder.with_row(dash_b.Row(row.title).id(panel_id))
        for panel in row.panels:
            panel_id += 1
            builder = builder.with_panel(build_panel(panel, panel_id))  # type: ignore[arg-type]
    encoded: dict[str, Any] = json.loads(json.dumps(builder.build(), cls=JSONEncoder))
    return encoded


def render(spec: DashboardSpec) -> str:
    return json.dumps(build_dashboard(spec), indent=2, sort_keys=True) + "\n"


def output_path(spec: DashboardSpec, out_dir: Path = OUT_DIR) -> Path:
    return out_dir / f"{spec.uid}.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="output directory")
    args = parser.parse_args(argv)
    stale = []
    for spec in DASHBOARDS:
        path = output_path(spec, args.out)
        text = render(spec)
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(path)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path} ({len(spec.panels)} panels)")
    # The turns dashboard reads the SQL store (PostgreSQL data source).
    from dashboards import turns

    path = args.out / f"{turns.UID}.json"
    if args.check:
        if not path.is_file() or path.read_text(encoding="utf-8") != turns.render():
            stale.append(path)
    else:
        path.write_text(turns.render(), encoding="utf-8")
        print(f"wrote {path} ({len(turns.PANELS)} panels)")
    if stale:
        names = ", ".join(str(p) for p in stale)
        print(f"out of date: {names}; run `python -m dashboards.generate`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
