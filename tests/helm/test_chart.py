"""The chart renders, lints clean (strict) and validates against the Kubernetes schemas of two
versions for each values file; and what it renders is what the daemon needs (grace period,
probes, security context, secrets by reference only, one port, the migration hook)."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

import helm_python
import kubernetes_validate
import pytest
import yaml

from monitor.config.daemon import DaemonConfig
from monitor.config.settings import load_settings
from monitor.stream.shutdown_budget import shutdown_budget_s
from tests.helm.chart import (
    CHART_DIR,
    FULLNAME,
    KUBE_VERSIONS,
    ROOT,
    VALUES_FILES,
    Manifest,
    containers,
    is_hook,
    one,
    render,
    rendered_config,
    values_of,
)

# Kinds of the Prometheus Operator (CRDs): kubernetes-validate has no schema for them.
CRD_KINDS = {"ServiceMonitor", "PrometheusRule"}
INFO = 1


def test_chart_metadata_follows_the_package() -> None:
    meta = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["apiVersion"] == "v2"
    assert meta["name"] == "casewatch"
    assert meta["appVersion"] == project["version"]


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("values_name", list(VALUES_FILES))
def test_values_file_lints_clean_in_strict_mode(values_name: str, kube_version: str) -> None:
    report = helm_python.lint(
        CHART_DIR, values_of(values_name), strict=True, kube_version=f"v{kube_version}"
    )
    assert report["errors"] == []
    # Only informational notes (Chart.yaml has no icon); no warning, no error.
    assert [m for m in report["messages"] if m["severity"] > INFO] == []


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("values_name", list(VALUES_FILES))
def test_every_rendered_object_validates_strictly(values_name: str, kube_version: str) -> None:
    docs = render(values_of(values_name), kube_version=kube_version, monitoring=True)
    assert docs
    for doc in docs:
        where = f"{doc['kind']}/{doc['metadata']['name']} ({values_name}, {kube_version})"
        if doc["kind"] in CRD_KINDS:
            assert doc["apiVersion"] == "monitoring.coreos.com/v1", where
            with pytest.raises(kubernetes_validate.SchemaNotFoundError):
                kubernetes_validate.validate(doc, kube_version, strict=True)
            check_operator_object(doc)
            continue
        try:
            kubernetes_validate.validate(doc, kube_version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{where}: {exc.message} at {list(exc.absolute_path)}")


def check_operator_object(doc: Manifest) -> None:
    """The fields the Prometheus Operator reads, for the kinds kubernetes-validate has no schema
    of (CRDs): no unknown key where the chart writes one, rules shaped as Prometheus wants."""
    spec = doc["spec"]
    assert set(doc) == {"apiVersion", "kind", "metadata", "spec"}
    if doc["kind"] == "ServiceMonitor":
        assert set(spec) == {"selector", "namespaceSelector", "endpoints"}
        assert set(spec["namespaceSelector"]) == {"matchNames"}
        for endpoint in spec["endpoints"]:
            assert set(endpoint) <= {"port", "path", "interval"}
            assert isinstance(endpoint["port"], str)
        return
    assert set(spec) == {"groups"}
    for group in spec["groups"]:
        assert set(group) <= {"name", "interval", "rules", "labels", "limit"}, group["name"]
        for rule in group["rules"]:
            assert ("record" in rule) != ("alert" in rule), rule
            assert set(rule) <= {
                "record",
                "alert",
                "expr",
                "for",
                "keep_firing_for",
                "labels",
                "annotations",
            }
            assert isinstance(rule["expr"], str | int | float)
            for mapping in ("labels", "annotations"):
                assert all(isinstance(v, str) for v in rule.get(mapping, {}).values()), rule


EXPECTED_KINDS = {
    # values file -> the workload kinds rendered in a cluster with the Prometheus Operator
    "default": {"ConfigMap", "Deployment", "PodDisruptionBudget", "Service", "ServiceAccount"},
    "minimal": {"ConfigMap", "Deployment", "PodDisruptionBudget", "Service", "ServiceAccount"},
    "production": {
        "ConfigMap",
        "Deployment",
        "Job",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "Service",
        "ServiceAccount",
    },
}


@pytest.mark.parametrize("values_name", list(VALUES_FILES))
def test_rendered_kinds(values_name: str) -> None:
    docs = render(values_of(values_name), monitoring=True)
    got = {d["kind"] for d in docs} - CRD_KINDS
    assert got == EXPECTED_KINDS[values_name]
    assert one(docs, "ServiceMonitor")["metadata"]["name"] == FULLNAME


def _drain(values: dict[str, Any]) -> float:
    daemon = values.get("config", {}).get("daemon", {})
    return float(daemon.get("drain_timeout_seconds", DaemonConfig().drain_timeout_seconds))


@pytest.mark.parametrize("values_name", list(VALUES_FILES))
def test_grace_period_covers_the_drain_plus_30s(values_name: str, tmp_path: Path) -> None:
    values = values_of(values_name)
    docs = render(values)
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == math.ceil(_drain(values)) + 30
    # ... which is the daemon's own bound on a stop, brokers reachable or not.
    path = tmp_path / "casewatch.yaml"
    path.write_text(yaml.safe_dump(rendered_config(docs)))
    assert pod["terminationGracePeriodSeconds"] >= shutdown_budget_s(load_settings(path))


def test_grace_period_rounds_a_fractional_drain_up_and_keeps_a_longer_setting() -> None:
    values = {"config": {"daemon": {"drain_timeout_seconds": 12.5}}}
    pod = one(render(values), "Deployment")["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 43
    pod = one(render({**values, "terminationGracePeriodSeconds": 120}), "Deployment")
    assert pod["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 120


@pytest.mark.parametrize("values_name", list(VALUES_FILES))
def test_pod_is_probed_locked_down_and_serves_one_named_port(values_name: str) -> None:
    values = values_of(values_name)
    docs = render(values, monitoring=True)
    deployment = one(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = containers(deployment)
    port = rendered_config(docs)["server"]["port"]
    assert container["ports"] == [{"name": "metrics", "containerPort": port, "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container["resources"]["limits"]["memory"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["automountServiceAccountToken"] is False
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    # The read-only root filesystem leaves writable only the mounted emptyDirs.
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts["/etc/casewatch"] == "config"
    assert container["args"] == ["run", "--config", "/etc/casewatch/casewatch.yaml"]
    assert deployment["spec"]["replicas"] == values.get("replicaCount", 1)
    service = one(docs, "Service")
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": port, "targetPort": "metrics", "protocol": "TCP"}
    ]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    monitor = one(docs, "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["selector"] == deployment["spec"]["selector"]


@pytest.mark.parametrize("values_name", list(VALUES_FILES))
def test_config_map_holds_a_config_the_daemon_accepts(values_name: str, tmp_path: Path) -> None:
    config = rendered_config(render(values_of(values_name)))
    assert config["server"]["host"] == "0.0.0.0"
    path = tmp_path / "casewatch.yaml"
    path.write_text(yaml.safe_dump(config))
    settings = load_settings(path)
    assert settings.daemon.drain_timeout_seconds == _drain(values_of(values_name))
    assert settings.kafka.bootstrap_servers == config["kafka"]["bootstrap_servers"]


def test_secrets_are_referenced_never_rendered() -> None:
    values = values_of("production")
    docs = render(values, monitoring=True)
    env = {e["name"]: e for c in containers(one(docs, "Deployment")) for e in c["env"]}
    secret = values["secrets"]["existingSecret"]
    for var, key in values["secrets"]["judgeApiKeys"].items():
        assert env[var]["valueFrom"] == {"secretKeyRef": {"name": secret, "key": key}}
    assert env["CASEWATCH_KAFKA__SASL_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": secret,
        "key": values["secrets"]["kafkaSaslPasswordKey"],
    }
    assert all("value" not in e for name, e in env.items() if name != "PYTHONUNBUFFERED")
    # Each judge reads its key from an env var the pod sets from the Secret.
    for judge in rendered_config(docs)["judges"].values():
        assert judge["api_key_env"] in env
        assert "api_key" not in judge
    assert not [d for d in docs if d["kind"] == "Secret"]


def test_storage_url_can_come_from_the_secret() -> None:
    values = {
        "replicaCount": 2,
        "secrets": {"existingSecret": "cw", "storageUrlKey": "database-url"},
    }
    docs = render(values)
    (container,) = containers(one(docs, "Deployment"))
    env = {e["name"]: e for e in container["env"]}
    assert env["CASEWATCH_STORAGE__URL"]["valueFrom"]["secretKeyRef"]["key"] == "database-url"
    # Not SQLite in the pod any more: no /data volume, and the migration hook runs.
    assert "/data" not in {m["mountPath"] for m in container["volumeMounts"]}
    assert one(docs, "Job", hook=True)


def test_migration_hook_runs_db_upgrade_with_the_same_config_and_secrets() -> None:
    docs = render(values_of("production"))
    job = one(docs, "Job", hook=True)
    hook_config = one(docs, "ConfigMap", hook=True)
    annotations = job["metadata"]["annotations"]
    assert annotations["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert int(hook_config["metadata"]["annotations"]["helm.sh/hook-weight"]) < int(
        annotations["helm.sh/hook-weight"]
    )
    (container,) = containers(job)
    assert container["args"] == ["db", "upgrade", "--config", "/etc/casewatch/casewatch.yaml"]
    assert yaml.safe_load(hook_config["data"]["casewatch.yaml"]) == rendered_config(docs)
    (daemon,) = containers(one(docs, "Deployment"))
    assert container["env"] == daemon["env"]
    assert container["securityContext"] == daemon["securityContext"]
    volumes = job["spec"]["template"]["spec"]["volumes"]
    assert {"name": "config", "configMap": {"name": hook_config["metadata"]["name"]}} in volumes
    # Hooks run before the release's ServiceAccount exists.
    assert "serviceAccountName" not in job["spec"]["template"]["spec"]


def test_no_migration_hook_for_sqlite_in_the_pod() -> None:
    docs = render({})
    assert not [d for d in docs if is_hook(d)]
    (container,) = containers(one(docs, "Deployment"))
    assert {"name": "data", "mountPath": "/data"} in container["volumeMounts"]


def _egress_ports(policy: Manifest) -> set[tuple[int, str]]:
    return {(p["port"], p["protocol"]) for rule in policy["spec"]["egress"] for p in rule["ports"]}


def test_network_policy_allows_only_dns_kafka_database_and_judges() -> None:
    values = values_of("production")
    policy = one(render(values), "NetworkPolicy")
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    np = values["networkPolicy"]
    expected = {(53, "UDP"), (53, "TCP")} | {
        (port, "TCP")
        for section in ("kafka", "database", "judges")
        for port in np[section]["ports"]
    }
    assert _egress_ports(policy) == expected
    (ingress,) = policy["spec"]["ingress"]
    assert ingress["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    assert ingress["from"] == np["metricsFrom"]


def test_network_policy_is_off_by_default() -> None:
    assert not [d for d in render({}) if d["kind"] == "NetworkPolicy"]


@pytest.mark.parametrize("setting", ["auto", True, False])
@pytest.mark.parametrize("operator", [True, False])
def test_service_monitor_follows_the_cluster_capabilities(setting: Any, operator: bool) -> None:
    docs = render({"serviceMonitor": {"enabled": setting}}, monitoring=operator)
    rendered = any(d["kind"] == "ServiceMonitor" for d in docs)
    assert rendered == (setting is True or (setting == "auto" and operator))


def test_monitoring_labels_reach_the_operator_objects() -> None:
    docs = render(values_of("production"))
    labels = one(docs, "ServiceMonitor")["metadata"]["labels"]
    assert labels["release"] == "kube-prometheus-stack"


def test_topology_spread_selects_the_pods() -> None:
    deployment = one(render(values_of("production")), "Deployment")
    (constraint,) = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert (
        constraint["labelSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    )


def test_config_change_rolls_the_pods() -> None:
    def checksum(values: dict[str, Any]) -> str:
        deployment = one(render(values), "Deployment")
        return str(deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"])

    assert checksum({}) != checksum({"config": {"log_level": "debug"}})


def test_static_membership_names_each_pod_after_itself() -> None:
    docs = render({"staticMembership": {"enabled": True}})
    (container,) = containers(one(docs, "Deployment"))
    env = {e["name"]: e for e in container["env"]}
    assert env["CASEWATCH_KAFKA__GROUP_INSTANCE_ID"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.name"}
    }
    (container,) = containers(one(render({}), "Deployment"))
    assert "CASEWATCH_KAFKA__GROUP_INSTANCE_ID" not in {e["name"] for e in container["env"]}


def test_migration_pods_are_not_daemon_pods() -> None:
    docs = render(values_of("production"))
    job_labels = one(docs, "Job", hook=True)["spec"]["template"]["metadata"]["labels"]
    daemon_labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]

    def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
        return selector.items() <= labels.items()

    for selector in (
        one(docs, "Service")["spec"]["selector"],
        one(docs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
        one(docs, "Deployment")["spec"]["selector"]["matchLabels"],
    ):
        assert selects(selector, daemon_labels)
        assert not selects(selector, job_labels)
    # The NetworkPolicy confines both.
    policy = one(docs, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"]
    assert selects(policy, daemon_labels) and selects(policy, job_labels)


def test_extra_volumes_carry_the_files_the_config_names() -> None:
    values = {
        "secrets": {"existingSecret": "cw", "storageUrlKey": "database-url"},
        "extraVolumes": [{"name": "kafka-ca", "secret": {"secretName": "kafka-ca"}}],
        "extraVolumeMounts": [{"name": "kafka-ca", "mountPath": "/etc/kafka-ca", "readOnly": True}],
        "config": {"kafka": {"security_protocol": "SSL", "ssl_cafile": "/etc/kafka-ca/ca.crt"}},
    }
    docs = render(values)
    for doc in (one(docs, "Deployment"), one(docs, "Job", hook=True)):
        (container,) = containers(doc)
        assert values["extraVolumeMounts"][0] in container["volumeMounts"]
        assert values["extraVolumes"][0] in doc["spec"]["template"]["spec"]["volumes"]
        kubernetes_validate.validate(doc, KUBE_VERSIONS[0], strict=True)
