"""Write helm/casewatch/values.schema.json: the chart's values, whose ``config`` is the JSON Schema
of ``monitor.config.settings.Settings`` (the casewatch YAML the chart renders into its ConfigMap).

So `helm install` refuses a bad value with the key's path and the broken constraint, the same
constraints the daemon would refuse at start, before anything is deployed. Secret fields
(``api_key``, ``kafka.sasl_password``, ``redact``, ``redaction.key``) are left out of
``config``: with ``additionalProperties: false`` the schema refuses them, since secrets come
from ``secrets``.

    .venv/bin/python scripts/helm_values_schema.py          # rewrite the file
    .venv/bin/python scripts/helm_values_schema.py --check  # exit 1 if it is out of date

Run it after changing the settings (monitor/config/settings.py, monitor/config/);
tests/helm/test_values_schema.py fails until you do.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_PATH = ROOT / "helm" / "casewatch" / "values.schema.json"

# Fields of the settings that hold secrets: never in values or ConfigMaps.
SECRET_FIELDS: dict[str, tuple[str, ...]] = {
    "Settings": ("redact",),
    "JudgeConfig": ("api_key",),
    "KafkaConfig": ("sasl_password",),
    "RedactionConfig": ("key",),  # From key_env or key_file
}

Schema = dict[str, Any]


def _obj(properties: Schema, description: str | None = None, **extra: Any) -> Schema:
    schema: Schema = {"type": "object", "additionalProperties": False, "properties": properties}
    if description:
        schema["description"] = description
    schema.update(extra)
    return schema


def _str(description: str | None = None, **extra: Any) -> Schema:
    schema: Schema = {"type": "string", **extra}
    if description:
        schema["description"] = description
    return schema


_FREE_OBJECT: Schema = {"type": "object"}
_FREE_LIST: Schema = {"type": "array"}
_LABELS: Schema = {"type": "object", "additionalProperties": {"type": "string"}}
_AUTO_BOOL: Schema = {
    "enum": ["auto", True, False],
    "description": "auto: when the cluster serves monitoring.coreos.com/v1; true: always; "
    "false: never.",
}
_PORTS: Schema = {
    "type": "array",
    "items": {"type": "integer", "minimum": 1, "maximum": 65535},
}
_PROBE: Schema = _obj(
    {
        name: {"type": "integer", "minimum": 1}
        for name in (
            "initialDelaySeconds",
            "periodSeconds",
            "timeoutSeconds",
            "failureThreshold",
            "successThreshold",
        )
    }
)
_PEERS: Schema = {"type": "array", "items": {"type": "object"}}


def config_schema() -> Schema:
    """The JSON Schema of the settings, secret fields removed."""
    from monitor.config.settings import Settings

    schema = copy.deepcopy(Settings.model_json_schema())
    defs: dict[str, Schema] = schema.get("$defs", {})
    for name, fields in SECRET_FIELDS.items():
        target = schema if name == "Settings" else defs[name]
        for field in fields:
            del target["properties"][field]
            if field in target.get("required", []):
                target["required"].remove(field)
    schema["description"] = (
        "The casewatch configuration (monitor/config/settings.py), rendered into the ConfigMap. "
        "Secrets are not allowed here: use `secrets`."
    )
    schema["title"] = "casewatch config"
    return schema


def chart_schema() -> Schema:
    config = config_schema()
    defs = config.pop("$defs", {})
    properties: Schema = {
        "image": _obj(
            {
                "repository": _str("Image repository.", minLength=1),
                "tag": _str("Image tag; empty means the chart's appVersion."),
                "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
            }
        ),
        "imagePullSecrets": {
            "type": "array",
            "items": _obj({"name": _str(minLength=1)}, required=["name"]),
        },
        "nameOverride": _str(),
        "fullnameOverride": _str(),
        "replicaCount": {
            "type": "integer",
            "minimum": 0,
            "description": "Daemons in the consumer group.",
        },
        "config": config,
        "staticMembership": _obj(
            {"enabled": {"type": "boolean"}},
            "Each pod joins the consumer group under its pod name (kafka.group_instance_id).",
        ),
        "secrets": _obj(
            {
                "existingSecret": _str("Name of an existing Secret holding the keys below."),
                "judgeApiKeys": {
                    "type": "object",
                    "description": "Env var name -> key in existingSecret.",
                    "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
                    "additionalProperties": {"type": "string", "minLength": 1},
                },
                "kafkaSaslPasswordKey": _str("Key of the Kafka SASL password in existingSecret."),
                "storageUrlKey": _str("Key of the database URL in existingSecret."),
                # The pseudonymization key (sets redaction.key)
                "redactionKeyKey": _str("Key of the redaction key in existingSecret."),
            }
        ),
        "terminationGracePeriodSeconds": {
            "type": ["integer", "null"],
            "minimum": 1,
            "description": "null: ceil(config.daemon.drain_timeout_seconds) + 30.",
        },
        "extraEnv": {"type": "array", "items": {"type": "object", "required": ["name"]}},
        "extraVolumes": {"type": "array", "items": {"type": "object", "required": ["name"]}},
        "extraVolumeMounts": {
            "type": "array",
            "items": {"type": "object", "required": ["name", "mountPath"]},
        },
        "strategy": _FREE_OBJECT,
        "resources": _FREE_OBJECT,
        "probes": _obj({"liveness": _PROBE, "readiness": _PROBE, "startup": _PROBE}),
        "podSecurityContext": _FREE_OBJECT,
        "securityContext": _FREE_OBJECT,
        "serviceAccount": _obj(
            {"create": {"type": "boolean"}, "name": _str(), "annotations": _LABELS}
        ),
        "service": _obj(
            {
                "type": {"enum": ["ClusterIP", "NodePort", "LoadBalancer"]},
                "annotations": _LABELS,
            }
        ),
        "podAnnotations": _LABELS,
        "podLabels": _LABELS,
        "nodeSelector": _LABELS,
        "tolerations": _FREE_LIST,
        "affinity": _FREE_OBJECT,
        "topologySpreadConstraints": _FREE_LIST,
        "priorityClassName": _str(),
        "podDisruptionBudget": _obj(
            {
                "enabled": {"type": "boolean"},
                "maxUnavailable": {"type": ["integer", "string"]},
            }
        ),
        "serviceMonitor": _obj(
            {
                "enabled": _AUTO_BOOL,
                "interval": _str(pattern="^[0-9]+(ms|s|m|h)$"),
                "labels": _LABELS,
            }
        ),
        "prometheusRule": _obj({"enabled": _AUTO_BOOL, "labels": _LABELS}),
        # The alerts' link bases (templates/prometheusrule.yaml).
        "alerts": _obj(
            {
                "runbookBaseUrl": _str("Base URL of rules/ (RUNBOOK.md)", pattern="^https?://"),
                "grafanaUrl": _str("Grafana's URL", pattern="^https?://"),
            }
        ),
        "dashboards": _obj(
            {
                "enabled": {"type": "boolean"},
                "labels": _LABELS,
                "annotations": _LABELS,
                "namespace": _str(),
            }
        ),
        "dbUpgrade": _obj(
            {
                "enabled": {"type": "boolean"},
                "activeDeadlineSeconds": {"type": "integer", "minimum": 1},
                "backoffLimit": {"type": "integer", "minimum": 0},
            }
        ),
        "networkPolicy": _obj(
            {
                "enabled": {"type": "boolean"},
                "metricsFrom": _PEERS,
                "dns": _obj({"enabled": {"type": "boolean"}, "to": _PEERS}),
                "kafka": _obj({"ports": _PORTS, "to": _PEERS}),
                "database": _obj({"ports": _PORTS, "to": _PEERS}),
                "judges": _obj({"ports": _PORTS, "to": _PEERS}),
            }
        ),
    }
    # Helm passes `global` to every chart; subchart-style values must not be refused.
    properties["global"] = _FREE_OBJECT
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "casewatch chart values",
        **_obj(properties),
        "$defs": defs,
    }


def render() -> str:
    return json.dumps(chart_schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = SCHEMA_PATH.read_text(encoding="utf-8") if SCHEMA_PATH.exists() else ""
        if current != text:
            print(
                f"{SCHEMA_PATH.relative_to(ROOT)} is out of date: "
                "run .venv/bin/python scripts/helm_values_schema.py",
                file=sys.stderr,
            )
            return 1
        return 0
    SCHEMA_PATH.write_text(text, encoding="utf-8")
    print(f"wrote {SCHEMA_PATH.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
