"""The chart under test, rendered with Helm's own SDK (helm-python-sdk: Helm 4's Go code through
ctypes, no helm binary), and the values files every test renders."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import helm_python
import yaml
from helm_python import _native

ROOT = Path(__file__).resolve().parents[2]
CHART_DIR = ROOT / "helm" / "casewatch"
RELEASE = "cw"
NAMESPACE = "casewatch"
FULLNAME = f"{RELEASE}-casewatch"
# Kubernetes versions every values file is rendered for, linted against and validated with.
KUBE_VERSIONS = ("1.29.0", "1.33.0")
# What a cluster with the Prometheus Operator serves (`.Capabilities.APIVersions`).
MONITORING_APIS = (
    "monitoring.coreos.com/v1",
    "monitoring.coreos.com/v1/ServiceMonitor",
    "monitoring.coreos.com/v1/PrometheusRule",
)
# name -> values file (None: the chart's values.yaml alone).
VALUES_FILES: dict[str, Path | None] = {
    "default": None,
    "production": CHART_DIR / "ci" / "production-values.yaml",
    "minimal": CHART_DIR / "ci" / "minimal-values.yaml",
}

Manifest = dict[str, Any]


def values_of(name: str) -> dict[str, Any]:
    path = VALUES_FILES[name]
    if path is None:
        return {}
    loaded: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return loaded


@cache
def chart() -> helm_python.Chart:
    # The library logs every symlink it follows (files/rules, files/dashboards) at INFO.
    helm_python.disable_logging()
    return helm_python.Chart.load(CHART_DIR)


def render_files(
    values: dict[str, Any],
    *,
    kube_version: str = KUBE_VERSIONS[-1],
    monitoring: bool = False,
) -> dict[str, str]:
    """{template path: rendered text}, as `helm install` would render it.

    ``monitoring`` makes the cluster serve the Prometheus Operator's APIs. Chart.render() has no
    parameter for the cluster's API versions and Kubernetes version; the library's render call
    takes them (``api_versions``, ``kube_version``), so this calls it directly (pinned < 0.3).
    """
    opts: dict[str, Any] = {
        "name": RELEASE,
        "namespace": NAMESPACE,
        "is_install": True,
        "kube_version": f"v{kube_version}",
    }
    if monitoring:
        opts["api_versions"] = list(MONITORING_APIS)
    rendered = _native.call_string(
        "helm_render", chart()._raw(), json.dumps(values), json.dumps(opts)
    )
    files: dict[str, str] = json.loads(rendered)
    return files


def render(values: dict[str, Any], **kwargs: Any) -> list[Manifest]:
    """The rendered Kubernetes objects (hooks included; NOTES.txt and empty documents left out)."""
    docs: list[Manifest] = []
    for path, text in sorted(render_files(values, **kwargs).items()):
        if not path.endswith((".yaml", ".yml")):
            continue
        docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


def kinds(docs: list[Manifest]) -> list[str]:
    return sorted(d["kind"] for d in docs)


def one(docs: list[Manifest], kind: str, *, hook: bool = False) -> Manifest:
    """The single object of ``kind`` (hook objects only with ``hook``)."""
    found = [d for d in docs if d["kind"] == kind and is_hook(d) == hook]
    assert len(found) == 1, f"expected one {kind} (hook={hook}), got {len(found)}"
    return found[0]


def is_hook(doc: Manifest) -> bool:
    return "helm.sh/hook" in (doc["metadata"].get("annotations") or {})


def containers(doc: Manifest) -> Iterator[Manifest]:
    yield from doc["spec"]["template"]["spec"]["containers"]


def rendered_config(docs: list[Manifest]) -> dict[str, Any]:
    """The casewatch YAML config held by the release's ConfigMap."""
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == FULLNAME]
    config: dict[str, Any] = yaml.safe_load(cm["data"]["casewatch.yaml"])
    return config
