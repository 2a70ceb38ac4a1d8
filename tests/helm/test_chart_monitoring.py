"""PrometheusRule and dashboard ConfigMaps come from the repository's rules/ and dashboards/ (one
source): files/rules and files/dashboards are symlinks Helm follows when it loads or packages the
chart. The comparisons are parametrised over the files that exist, so they hold with none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml

from tests.helm.chart import CHART_DIR, FULLNAME, ROOT, one, render

RULE_FILES = sorted([*ROOT.glob("rules/*.yml"), *ROOT.glob("rules/*.yaml")])
DASHBOARD_FILES = sorted(ROOT.glob("dashboards/*.json"))


def _groups(path: Path) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]
    return groups


def _dashboard_maps(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        d
        for d in docs
        if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith(f"{FULLNAME}-dashboard-")
    ]


@pytest.mark.parametrize(("link", "target"), [("rules", "rules"), ("dashboards", "dashboards")])
def test_chart_files_link_to_the_repository_directories(link: str, target: str) -> None:
    path = CHART_DIR / "files" / link
    assert path.is_symlink()
    # A dangling link would make every chart load fail: the directory must exist (.gitkeep).
    assert path.resolve() == (ROOT / target).resolve()
    assert path.resolve().is_dir()


def test_prometheus_rule_groups_equal_the_rules_files() -> None:
    docs = render({}, monitoring=True)
    rules = [d for d in docs if d["kind"] == "PrometheusRule"]
    expected = [group for path in RULE_FILES for group in _groups(path)]
    if not expected:
        assert rules == []  # no rules/ file yet: no empty PrometheusRule either
        return
    (rule,) = rules
    assert rule["metadata"]["name"] == FULLNAME
    assert rule["spec"]["groups"] == expected


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_each_rules_file_reaches_the_prometheus_rule(path: Path) -> None:
    rule = one(render({}, monitoring=True), "PrometheusRule")
    names = [g["name"] for g in rule["spec"]["groups"]]
    for group in _groups(path):
        assert names.count(group["name"]) == 1
    # Alert templates reach Prometheus untouched (the file is read, not templated).
    text = path.read_text(encoding="utf-8")
    if "{{ $labels" in text:
        assert "{{ $labels" in yaml.safe_dump(rule["spec"])


def test_prometheus_rule_follows_the_cluster_capabilities() -> None:
    assert not [d for d in render({}, monitoring=False) if d["kind"] == "PrometheusRule"]
    off = render({"prometheusRule": {"enabled": False}}, monitoring=True)
    assert not [d for d in off if d["kind"] == "PrometheusRule"]


def test_one_config_map_per_dashboard_file() -> None:
    maps = _dashboard_maps(render({}))
    assert sorted(key for m in maps for key in m["data"]) == [p.name for p in DASHBOARD_FILES]
    assert not _dashboard_maps(render({"dashboards": {"enabled": False}}))


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.name)
def test_each_dashboard_appears_once_labelled_for_the_sidecar(path: Path) -> None:
    values = {"dashboards": {"annotations": {"grafana_folder": "casewatch"}}}
    maps = [m for m in _dashboard_maps(render(values)) if path.name in m["data"]]
    assert len(maps) == 1
    (cm,) = maps
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "casewatch"}
    assert json.loads(cm["data"][path.name]) == json.loads(path.read_text(encoding="utf-8"))
    assert len(cm["metadata"]["name"]) <= 63


def test_packaged_chart_carries_the_linked_files(tmp_path: Path) -> None:
    archive = helm_python.package(CHART_DIR, destination=tmp_path)
    with helm_python.Chart.load(archive) as packaged:
        names = {f["name"] for f in packaged.files}
        templates = {t["name"] for t in packaged.templates}
    assert "templates/prometheusrule.yaml" in templates
    for path in RULE_FILES:
        assert f"files/rules/{path.name}" in names
    for path in DASHBOARD_FILES:
        assert f"files/dashboards/{path.name}" in names
    # Not the promtool tests, the runbook or the chart's own CI values (.helmignore).
    assert not [n for n in names if n.startswith(("files/rules/tests/", "ci/"))]
