"""The chart's README values table is the one values.yaml generates, every value is documented,
and the install instructions of the docs (docs/deploy.md) name the Secret keys the chart reads."""

from __future__ import annotations

import importlib.util
import re
from types import ModuleType

import yaml

from tests.helm.chart import CHART_DIR, ROOT, containers, one, render, values_of


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "helm_values_docs", ROOT / "scripts" / "helm_values_docs.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_values_table_is_current() -> None:
    readme = (CHART_DIR / "README.md").read_text(encoding="utf-8")
    assert _script().rewritten(readme) == readme, (
        "helm/casewatch/README.md's values table is stale: "
        "run .venv/bin/python scripts/helm_values_docs.py"
    )


def test_every_value_is_documented() -> None:
    text = (CHART_DIR / "values.yaml").read_text(encoding="utf-8")
    documented = {key for key, _ in _script().documented_keys(text)}
    values = yaml.safe_load(text)

    def undocumented(node: object, prefix: str) -> list[str]:
        if prefix in documented:
            return []
        if isinstance(node, dict) and node:
            return [
                key
                for k, v in node.items()
                for key in undocumented(v, f"{prefix}.{k}" if prefix else k)
            ]
        return [prefix]

    assert undocumented(values, "") == []


def test_documented_keys_follow_the_nesting() -> None:
    text = "a:\n  # -- the b\n  b: 1\n  c:\n    # -- the d,\n    # continued\n    d: [1]\n"
    assert _script().documented_keys(text) == [("a.b", "the b"), ("a.c.d", "the d, continued")]


def _deploy_section() -> str:
    page = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    assert page.startswith("# Deploy on Kubernetes\n"), "docs/deploy.md is the install page"
    return page


def test_deploy_page_secret_command_creates_every_key_the_production_values_read() -> None:
    section = _deploy_section()
    created = set(re.findall(r"--from-literal=([a-z0-9-]+)=", section))
    docs = render(values_of("production"))
    (container,) = containers(one(docs, "Deployment"))
    read = {
        e["valueFrom"]["secretKeyRef"]["key"]
        for e in container["env"]
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert created == read
    secret = values_of("production")["secrets"]["existingSecret"]
    assert f"create secret generic {secret}" in section


def test_deploy_page_install_command_points_at_the_chart() -> None:
    section = _deploy_section()
    assert "helm install casewatch ./helm/casewatch -n casewatch -f my-values.yaml" in section
    (example,) = re.findall(r"cp (\S+) my-values.yaml", section)
    assert (ROOT / example).is_file(), example
    for topic in ("grace period", "replicas", "partitions", "secretKeyRef", "Prometheus Operator"):
        assert topic in section
