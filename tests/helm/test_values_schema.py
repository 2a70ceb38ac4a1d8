"""values.schema.json is generated from the settings and refuses bad values with a message naming
the key; what a schema cannot express (cross-field rules) the templates refuse with `fail`.

What happens to each kind of bad value: a wrong type, an out-of-range number, an unknown key, a
value outside an enum, or a secret put in values → `helm install` (here: render) is refused by the
schema, naming the key's path; a grace period shorter than the drain, several replicas on SQLite,
a judge key env var or SASL without its Secret key → refused by the template with what to set.
Nothing is rendered in either case.
"""

from __future__ import annotations

import importlib.util
import json
from types import ModuleType
from typing import Any

import helm_python
import pytest

from tests.helm.chart import CHART_DIR, ROOT, render


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "helm_values_schema", ROOT / "scripts" / "helm_values_schema.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_schema_is_the_generated_one() -> None:
    committed = (CHART_DIR / "values.schema.json").read_text(encoding="utf-8")
    assert committed == _script().render(), (
        "helm/casewatch/values.schema.json is stale (the settings changed?): "
        "run make chart (scripts/helm_values_schema.py)"
    )


def test_config_schema_is_the_settings_schema_without_secrets() -> None:
    from monitor.config.settings import Settings

    schema = json.loads((CHART_DIR / "values.schema.json").read_text())
    config = schema["properties"]["config"]
    settings = Settings.model_json_schema()
    assert set(config["properties"]) == set(settings["properties"]) - {"redact"}
    assert "api_key" not in schema["$defs"]["JudgeConfig"]["properties"]
    assert "sasl_password" not in schema["$defs"]["KafkaConfig"]["properties"]
    assert schema["$defs"]["DaemonConfig"] == settings["$defs"]["DaemonConfig"]


SCHEMA_VIOLATIONS: list[tuple[dict[str, Any], str]] = [
    ({"replicaCount": "three"}, "at '/replicaCount': got string, want integer"),
    ({"replicaCount": -1}, "/replicaCount"),
    ({"config": {"daemon": {"concurrency": 0}}}, "at '/config/daemon/concurrency'"),
    ({"config": {"daemon": {"drain_timeout_seconds": "1m"}}}, "/config/daemon/drain_timeout"),
    ({"config": {"kafka": {"security_protocol": "TLS"}}}, "value must be one of 'PLAINTEXT'"),
    ({"config": {"kafka": {"sasl_password": "hunter2"}}}, "'sasl_password' not allowed"),
    (
        {"config": {"judges": {"p": {"model": "gpt-4o", "api_key": "sk-live-123"}}}},
        "at '/config/judges/p': additional properties 'api_key' not allowed",
    ),
    ({"config": {"redact": ["x"]}}, "'redact' not allowed"),
    ({"config": {"kafka": {"topics": []}}}, "/config/kafka/topics"),
    ({"config": {"sampling": {"default_rate": 1.5}}}, "/config/sampling/default_rate"),
    ({"config": {"log_level": "verbose"}}, "/config/log_level"),
    ({"config": {"unknown_section": {}}}, "'unknown_section' not allowed"),
    ({"replicas": 3}, "additional properties 'replicas' not allowed"),
    ({"staticMembership": {"enabled": "yes"}}, "/staticMembership/enabled"),
    ({"serviceMonitor": {"enabled": "yes"}}, "at '/serviceMonitor/enabled'"),
    ({"serviceMonitor": {"interval": "often"}}, "/serviceMonitor/interval"),
    ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    ({"networkPolicy": {"kafka": {"ports": [0]}}}, "/networkPolicy/kafka/ports/0"),
    ({"secrets": {"judgeApiKeys": {"OPENAI-KEY": "k"}}}, "invalid propertyName 'OPENAI-KEY'"),
    ({"terminationGracePeriodSeconds": "60s"}, "/terminationGracePeriodSeconds"),
]


@pytest.mark.parametrize(("values", "message"), SCHEMA_VIOLATIONS)
def test_schema_violations_are_refused_naming_the_key(values: dict[str, Any], message: str) -> None:
    with pytest.raises(helm_python.HelmValuesError) as exc_info:
        render(values)
    assert message in str(exc_info.value)
    assert "values don't meet the specifications of the schema" in str(exc_info.value)


def test_lint_refuses_a_schema_violation_too() -> None:
    report = helm_python.lint(CHART_DIR, {"replicaCount": "three"}, strict=True)
    text = json.dumps(report)
    assert "/replicaCount" in text


TEMPLATE_FAILURES: list[tuple[dict[str, Any], str]] = [
    (
        {"terminationGracePeriodSeconds": 40},
        "terminationGracePeriodSeconds=40 is less than "
        "config.daemon.drain_timeout_seconds + 30 = 60",
    ),
    (
        {"config": {"daemon": {"drain_timeout_seconds": 90}}, "terminationGracePeriodSeconds": 100},
        "= 120",
    ),
    ({"replicaCount": 3}, "replicaCount=3 with a SQLite storage.url"),
    (
        {"config": {"judges": {"p": {"model": "m", "api_key_env": "OPENAI_API_KEY"}}}},
        "add secrets.judgeApiKeys.OPENAI_API_KEY",
    ),
    (
        {
            "secrets": {"existingSecret": "cw"},
            "config": {"kafka": {"security_protocol": "SASL_SSL", "sasl_username": "u"}},
        },
        "set secrets.kafkaSaslPasswordKey",
    ),
    ({"secrets": {"storageUrlKey": "url"}}, "secrets.existingSecret: name the Secret"),
    (
        {"config": {"kafka": {"group_instance_id": "casewatch-0"}}},
        "set staticMembership.enabled: true",
    ),
]


@pytest.mark.parametrize(("values", "message"), TEMPLATE_FAILURES)
def test_inconsistent_values_are_refused_with_what_to_set(
    values: dict[str, Any], message: str
) -> None:
    with pytest.raises(helm_python.HelmRenderError) as exc_info:
        render(values)
    assert message in str(exc_info.value)
