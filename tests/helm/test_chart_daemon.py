"""The configuration the chart renders starts a real daemon.

For each values file the test renders the chart, takes the ConfigMap's casewatch.yaml, the
container's args and env from the Deployment and the image's ENTRYPOINT from the Dockerfile, and
runs exactly that as a subprocess, changing only where things are on this machine:

- kafka.bootstrap_servers / topics: the embedded Tansu broker and a fresh topic; the broker
  speaks no SASL, so security_protocol becomes PLAINTEXT (the SASL fields are dropped);
- storage.url: a temporary SQLite file, or a throwaway PostgreSQL schema for production values;
- server.port: a free port (server.host stays the rendered 0.0.0.0);
- judges' base_url: the fake OpenAI-compatible judge server;
- secretKeyRef env: values from a stand-in for the Secret docs/deploy.md tells users to create.

Then /readyz must turn ready (also with static membership: the pod name as
kafka.group_instance_id). With the production values the migration hook's command runs
first, one turn is judged by the panel with the keys from the Secret, and SIGTERM ends the
daemon with exit 0 within the pod's grace period.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from consumers.tansu import EmbeddedBroker, free_port
from monitor.config.storage import StorageConfig
from monitor.runtime.processes import spawn_logged
from monitor.storage.audit import stored_verdicts
from monitor.storage.store import Store
from monitor.stream.readiness import STATUS_INTERVAL_S
from tests.dockerfile import runtime_entrypoint
from tests.fake_judge_server import FakeJudgeServer
from tests.fixtures.broker import produce
from tests.fixtures.databases import make_turn
from tests.fixtures.judge_server import FAKE_JUDGE_KEY
from tests.helm.chart import (
    NAMESPACE,
    Manifest,
    containers,
    one,
    render,
    rendered_config,
    values_of,
)
from tests.support.http import http_get
from tests.support.waiting import wait_for

CONFIG_PATH = "/etc/casewatch/casewatch.yaml"
POD_NAME = "cw-casewatch-5d8f7c9b4-x2x7q"
# The Secret of docs/deploy.md (production-values.yaml names these keys).
SECRET = {
    "openai-api-key": FAKE_JUDGE_KEY,
    "vllm-api-key": FAKE_JUDGE_KEY,
    "kafka-sasl-password": "not-used-by-plaintext",
    "postgres-password": "",  # the test server trusts local connections
}
# Generous: a loaded 2-core machine, a cold interpreter, migrations, a broker metadata round trip.
READY_TIMEOUT_S = 120.0


def _executable(entrypoint: list[str]) -> list[str]:
    """The image's ENTRYPOINT with `casewatch` resolved to this virtualenv's script."""
    script = Path(sys.executable).with_name(entrypoint[0])
    assert script.exists(), f"{entrypoint[0]} is not installed next to {sys.executable}"
    return [str(script), *entrypoint[1:]]


def pod_env(container: Manifest) -> dict[str, str]:
    """The container's env as the kubelet would set it, secrets from SECRET."""
    env: dict[str, str] = {}
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = str(var["value"])
            continue
        source = var["valueFrom"]
        if "secretKeyRef" in source:
            key = source["secretKeyRef"]["key"]
            assert key in SECRET, f"env {var['name']} reads Secret key {key!r} nobody documents"
            env[var["name"]] = SECRET[key]
        elif "fieldRef" in source:
            field = source["fieldRef"]["fieldPath"]
            env[var["name"]] = {"metadata.name": POD_NAME, "metadata.namespace": NAMESPACE}[field]
        else:
            pytest.fail(f"unexpected env source {source}")
    return env


def localize(
    config: dict[str, Any], bootstrap: str, topic: str, db_url: str, port: int, judge_url: str
) -> dict[str, Any]:
    """The rendered config with only the machine-specific addresses changed (module docstring)."""
    doc = json.loads(json.dumps(config))
    kafka = doc["kafka"]
    kafka["bootstrap_servers"] = [bootstrap]
    kafka["topics"] = [topic]
    kafka["security_protocol"] = "PLAINTEXT"
    kafka.pop("sasl_mechanism", None)
    kafka.pop("sasl_username", None)
    # Quick group joins on Tansu (DESIGN.md); the production defaults take ~23 s to join.
    kafka.update(session_timeout_ms=6000, heartbeat_interval_ms=1000, max_poll_interval_ms=6000)
    doc["storage"]["url"] = db_url
    assert doc["server"]["host"] == "0.0.0.0"
    doc["server"]["port"] = port
    for judge in doc.get("judges", {}).values():
        judge["base_url"] = judge_url
    return doc


def command_of(container: Manifest, config_file: Path) -> list[str]:
    args = list(container["args"])
    assert CONFIG_PATH in args
    return [
        *_executable(runtime_entrypoint()),
        *(str(config_file) if a == CONFIG_PATH else a for a in args),
    ]


@contextmanager
def started(
    cmd: list[str], env: dict[str, str], cwd: Path, log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = spawn_logged(cmd, out, cwd=cwd, env=env)
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _ready(proc: subprocess.Popen[bytes], port: int, log: Path) -> bool:
    if proc.poll() is not None:
        pytest.fail(f"casewatch exited with {proc.returncode}:\n{log.read_text(errors='replace')}")
    try:
        status, _ = http_get(port, "/readyz")
    except OSError:
        return False
    return status == 200


def _turn_with_error_code(event_id: str) -> bytes:
    # production-values.yaml judges every turn whose answer carries an error code (always_judge).
    turn = make_turn(event_id, answer="Error E1234 means the VPN driver is outdated: reinstall it.")
    return turn.model_dump_json().encode()


@pytest.mark.integration
@pytest.mark.parametrize("values_name", ["default", "minimal", "production", "static"])
def test_rendered_config_and_args_start_a_ready_daemon(
    values_name: str,
    request: pytest.FixtureRequest,
    tansu_broker: EmbeddedBroker,
    kafka_topic: str,
    fake_judge: FakeJudgeServer,
    tmp_path: Path,
) -> None:
    production = values_name == "production"
    db_url: str = request.getfixturevalue("pg_url" if production else "sqlite_url")
    if values_name == "static":  # the default values with static group membership
        docs = render({"staticMembership": {"enabled": True}})
    else:
        docs = render(values_of(values_name))
    port = free_port()
    config = localize(
        rendered_config(docs),
        tansu_broker.bootstrap,
        kafka_topic,
        db_url,
        port,
        fake_judge.base_url,
    )
    config_file = tmp_path / "casewatch.yaml"
    config_file.write_text(yaml.safe_dump(config))
    deployment = one(docs, "Deployment")
    (container,) = containers(deployment)
    env = pod_env(container)
    if values_name == "static":
        assert env["CASEWATCH_KAFKA__GROUP_INSTANCE_ID"] == POD_NAME
    if production:
        (job,) = containers(one(docs, "Job", hook=True))
        migrate = subprocess.run(
            command_of(job, config_file),
            env={**os.environ, **pod_env(job)},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=READY_TIMEOUT_S,
        )
        assert migrate.returncode == 0, migrate.stderr
        assert "schema at revision" in migrate.stdout

    log = tmp_path / "daemon.log"
    with started(command_of(container, config_file), env, tmp_path, log) as proc:
        wait_for(
            lambda: _ready(proc, port, log),
            timeout=READY_TIMEOUT_S + STATUS_INTERVAL_S,
            what=f"/readyz of the daemon started from the {values_name} values",
        )
        status, body = http_get(port, "/healthz")
        assert status == 200, body
        if not production:
            return
        produce(tansu_broker.bootstrap, kafka_topic, [_turn_with_error_code("evt-helm-1")])
        store = Store.from_config(StorageConfig(url=db_url))
        try:
            wait_for(
                lambda: [v["event_id"] for v in stored_verdicts(store, limit=10)] == ["evt-helm-1"],
                timeout=READY_TIMEOUT_S,
                what="the turn judged by the panel and stored",
            )
        finally:
            store.close()
        # Both primaries were called with the key the pod got from the Secret.
        assert fake_judge.request_count >= 2
        auth = {
            h.get("Authorization") or h.get("authorization") for h in fake_judge.request_headers
        }
        assert auth == {f"Bearer {FAKE_JUDGE_KEY}"}
        proc.send_signal(signal.SIGTERM)
        grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        assert proc.wait(timeout=grace) == 0, log.read_text(errors="replace")
