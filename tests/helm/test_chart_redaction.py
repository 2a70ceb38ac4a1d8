"""The chart's redaction values: config rendered, the key by Secret reference only."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from monitor.config.settings import load_settings
from tests.helm.chart import containers, one, render, rendered_config


def test_redaction_is_on_by_default_and_the_rendered_config_loads(tmp_path: Path) -> None:
    config = rendered_config(render({}))
    assert config["redaction"]["enabled"] is True
    path = tmp_path / "casewatch.yaml"
    path.write_text(yaml.safe_dump(config))
    assert load_settings(path).redaction.before_judging


def test_the_redaction_key_comes_from_the_secret() -> None:
    values = {"secrets": {"existingSecret": "cw", "redactionKeyKey": "pseudonym-key"}}
    docs = render(values)
    env = {e["name"]: e for c in containers(one(docs, "Deployment")) for e in c["env"]}
    assert env["CASEWATCH_REDACTION__KEY"]["valueFrom"] == {
        "secretKeyRef": {"name": "cw", "key": "pseudonym-key"}
    }
    assert "key" not in rendered_config(docs)["redaction"]


def test_a_key_without_a_secret_is_refused() -> None:
    with pytest.raises(Exception, match=r"secrets\.existingSecret"):
        render({"secrets": {"redactionKeyKey": "pseudonym-key"}})
