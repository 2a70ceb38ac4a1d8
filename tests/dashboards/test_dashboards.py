"""The committed dashboards (dashboards/*.json, what users import) are well-formed Grafana
dashboards whose every query is valid PromQL over metrics the exporter declares.

Bad input: a committed file that differs from the generator's output fails the regeneration
test (and ``python -m dashboards.generate --check`` exits 1 naming it); a query naming an
undeclared metric, a label the exporter does not export, or a variable the dashboard does not
define fails here with the panel named.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import promql_parser
import pytest

from dashboards import generate
from dashboards.model import DashboardSpec, PanelSpec, Query, RowSpec
from dashboards.specs import DASHBOARDS
from monitor.metrics.exporter import METRIC_NAMES, is_declared
from tests.dashboards.queries import (
    dashboard_files,
    default_values,
    load,
    panels,
    queries,
    substitute,
    variables,
)

SCHEMA_VERSION = 41
# Prometheus' own series (alert state), besides the exporter's.
BUILTIN_SERIES = {"ALERTS"}
# Labels a query may group or match on: the exporter's bounded labels, the histogram's ``le``
# and the labels Prometheus puts on ALERTS.
ALLOWED_LABELS = {
    "assistant", "band", "metric", "judge", "reason", "outcome", "kind", "topic", "partition",
    "agreement", "sided_with", "role", "job", "signal", "window", "tier", "version", "le",
    "alertname", "alertstate", "severity", "bound",
    "config_hash",  # one value per judge configuration a replica ran with
    "cause",  # what finished an assembled trace: root, idle, cap, too_many_spans
    "unit",  # the judge budget's unit: calls or usd
    "why",  # why a dead letter holds its record: refused, unavailable, unacknowledged, backlog
    "patch",  # a Kafka client patch that fell back: the names written in consumers/_kafka*.py
    "rank",  # a failure mode's place by size in the newest run: 1..5 (never a mode id)
    "cell",  # the cascade's cheap-look band: severe, moderate, minor, none
    "stage",  # the review queue's call that failed: push or pull
}  # fmt: skip
FORBIDDEN = re.compile(r"event_id|conversation_id|turn_index", re.IGNORECASE)

FILES = dashboard_files()
DOCS = {path.name: load(path) for path in FILES}


def test_the_four_dashboards_are_committed() -> None:
    assert [p.name for p in FILES] == sorted(f"{spec.uid}.json" for spec in DASHBOARDS)
    assert {d["uid"] for d in DOCS.values()} == {
        "casewatch-overview", "casewatch-metrics", "casewatch-judges", "casewatch-pipeline",
    }  # fmt: skip


@pytest.mark.parametrize("spec", DASHBOARDS, ids=lambda s: s.uid)
def test_regenerating_gives_the_committed_json(spec: DashboardSpec) -> None:
    committed = generate.output_path(spec).read_text(encoding="utf-8")
    assert generate.render(spec) == committed, "run `python -m dashboards.generate`"


def test_check_mode_names_a_stale_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert generate.main(["--out", str(tmp_path)]) == 0
    assert generate.main(["--check", "--out", str(tmp_path)]) == 0
    stale = tmp_path / "casewatch-judges.json"
    stale.write_text(stale.read_text().replace("Judge latency", "Latency"))
    assert generate.main(["--check", "--out", str(tmp_path)]) == 1
    assert "casewatch-judges.json" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(DOCS))
def test_dashboard_shape(name: str) -> None:
    doc = DOCS[name]
    assert doc["schemaVersion"] == SCHEMA_VERSION
    assert doc["uid"] and doc["title"].startswith("casewatch / ")
    assert doc["timezone"] == "utc"
    assert "__inputs" not in doc  # provisioning does not resolve ${DS_...} inputs
    vars_ = variables(doc)
    ds = vars_["datasource"]
    assert (ds["type"], ds["query"]) == ("datasource", "prometheus")
    assistant = vars_["assistant"]
    assert assistant["type"] == "query"
    assert assistant["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    assert re.fullmatch(r"label_values\(casewatch_\w+, assistant\)", assistant["query"])
    assert assistant["multi"] and assistant["includeAll"] and assistant["allValue"] == ".*"


@pytest.mark.parametrize("name", sorted(DOCS))
def test_panel_ids_unique_and_every_panel_uses_the_datasource_variable(name: str) -> None:
    doc = DOCS[name]
    all_panels = list(panels(doc))
    ids = [p["id"] for p in all_panels]
    assert len(ids) == len(set(ids)), f"duplicate panel ids in {name}: {ids}"
    assert all(isinstance(i, int) and i > 0 for i in ids)
    data_panels = [p for p in all_panels if p["type"] != "row"]
    assert data_panels
    for panel in data_panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["id"]
        assert panel["targets"], f"panel {panel['title']!r} has no query"
        assert panel.get("description"), f"panel {panel['title']!r} has no description"
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)) and all(ref_ids)
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}"


@pytest.mark.parametrize("name", sorted(DOCS))
def test_no_ids_anywhere(name: str) -> None:
    assert not FORBIDDEN.search((Path(generate.OUT_DIR) / name).read_text(encoding="utf-8"))


def _selectors(expr: promql_parser.Expr) -> tuple[set[str], set[str]]:
    """Metric names and label names (matchers and grouping) used by ``expr``."""
    names: set[str] = set()
    labels: set[str] = set()

    def visit(node: promql_parser.Expr) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            if node.name:
                names.add(node.name)
            labels.update(m.name for m in node.matchers.matchers)
        elif isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
            labels.update(node.modifier.labels)

    promql_parser.walk(expr, visit)
    return names, labels


ALL_QUERIES = [q for doc in DOCS.values() for q in queries(doc)]


@pytest.mark.parametrize("query", ALL_QUERIES, ids=lambda q: q.where)
def test_every_query_parses_and_uses_declared_metrics_only(query: Any) -> None:
    doc = next(d for d in DOCS.values() if d["uid"] == query.dashboard)
    expr = substitute(query.expr, default_values(doc))  # KeyError: an undefined variable
    parsed = promql_parser.parse(expr)
    names, labels = _selectors(parsed)
    undeclared = {n for n in names if not is_declared(n) and n not in BUILTIN_SERIES}
    assert not undeclared, (
        f"{query.where}: not in monitor/metrics/exporter.py METRIC_NAMES: {undeclared}"
    )
    assert labels <= ALLOWED_LABELS, f"{query.where}: unbounded labels {labels - ALLOWED_LABELS}"
    assert not FORBIDDEN.search(expr)


def test_queries_cover_the_core_metrics() -> None:
    """The dashboards show every family the pipeline exports on every deployment (pairwise,
    rubric and Elo gauges belong to their own jobs' dashboards)."""
    used: set[str] = set()
    for q in ALL_QUERIES:
        doc = next(d for d in DOCS.values() if d["uid"] == q.dashboard)
        used |= _selectors(promql_parser.parse(substitute(q.expr, default_values(doc))))[0]
    families = {n.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count") for n in used}
    # Pairwise, baseline-tier, Elo and rubric jobs export their own families (not on these
    # four dashboards); build info and job success times are for joins and the job alerts.
    own_jobs = ("casewatch_rubric_", "casewatch_baseline_", "casewatch_elo_", "casewatch_pairwise_")
    not_shown = {n for n in METRIC_NAMES if n.startswith(own_jobs)} | {
        "casewatch_build_info",
        "casewatch_job_last_success_timestamp_seconds",
    }
    # The detectors' baseline, rate since the change point and change point are
    # NaN or absent until a detector is armed or alarms: the alert's annotations and
    # `casewatch detect` show them, the dashboards the statistic, armed and alarm.
    not_shown |= {
        "casewatch_detector_baseline_rate",
        "casewatch_detector_rate_since_change",
        "casewatch_detector_change_point_timestamp_seconds",
    }
    assert set(METRIC_NAMES) - not_shown <= families, set(METRIC_NAMES) - not_shown - families


def test_the_checks_catch_an_undeclared_metric_and_an_id_label() -> None:
    names, labels = _selectors(
        promql_parser.parse('sum by (conversation_id) (rate(casewatch_turns_total{band="x"}[1m]))')
    )
    assert names == {"casewatch_turns_total"} and not is_declared("casewatch_turns_total")
    assert labels - ALLOWED_LABELS == {"conversation_id"}


def test_substitute_rejects_an_undefined_variable() -> None:
    assert substitute('x{a=~"$assistant"}[$__rate_interval]', {
        "assistant": ".*", "__rate_interval": "1m"
    }) == 'x{a=~".*"}[1m]'  # fmt: skip
    with pytest.raises(KeyError):
        substitute("rate(x[$window])", {})


def test_generator_rejects_bad_specs() -> None:
    too_many = PanelSpec("stat", "t", "d", tuple(Query("up") for _ in range(11)))
    with pytest.raises(ValueError, match="at most 10 queries"):
        generate.build_panel(too_many, 1)
    odd = PanelSpec("heatmap", "t", "d", (Query("up"),))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown panel kind"):
        generate.build_panel(odd, 1)
    spec = DashboardSpec("u", "casewatch / t", "d", (RowSpec("r", (odd,)),))
    with pytest.raises(ValueError):
        generate.build_dashboard(spec)
