"""The ``baseline:`` settings section (scheduled baseline-tier checks)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from monitor.errors import ConfigError
from monitor.settings import load_settings


def test_disabled_by_default() -> None:
    assert load_settings().baseline.enabled is False


@pytest.mark.parametrize(
    ("baseline", "message"),
    [
        ({"enabled": True}, "needs 'probes' and at least one assistant"),
        (
            {"enabled": True, "probes": "p.jsonl", "assistants": [{"name": "a"}]},
            "needs an endpoint or from_turns",
        ),
        (
            {
                "enabled": True,
                "probes": "p.jsonl",
                "assistants": [{"name": "a", "endpoint": {"kind": "openai", "url": "http://x"}}],
            },
            "needs 'model'",
        ),
        (
            {
                "enabled": True,
                "probes": "p.jsonl",
                "assistants": [{"name": "a", "endpoint": {"kind": "template", "url": "http://x"}}],
            },
            "needs 'body'",
        ),
        (
            {
                "enabled": True,
                "probes": "p.jsonl",
                "judge": "nope",
                "assistants": [{"name": "a", "from_turns": True}],
            },
            "baseline: judge 'nope' is not configured",
        ),
        (
            {"probes": "p.jsonl", "assistants": [{"name": "a b", "from_turns": True}]},
            "baseline.assistants.0.name",
        ),
    ],
)
def test_bad_baseline_sections_name_the_problem(baseline: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(baseline=baseline)


def test_the_readme_baseline_example_loads(tmp_path: Path) -> None:
    readme = Path(__file__).resolve().parents[2] / "README.md"
    blocks = re.findall(r"```yaml\n(.*?)```", readme.read_text(encoding="utf-8"), re.S)
    (block,) = [b for b in blocks if b.startswith("baseline:")]
    config = tmp_path / "baseline.yaml"
    config.write_text(block, encoding="utf-8")
    primary = {"kind": "openai", "base_url": "http://judge/v1", "model": "m"}
    settings = load_settings(config, judges={"primary": primary})
    assert settings.baseline.enabled and settings.baseline.judge == "primary"
    stable, canary = settings.baseline.assistants
    assert stable.endpoint is not None and stable.endpoint.kind == "openai"
    assert canary.from_turns and canary.endpoint is not None
    assert canary.endpoint.body == {
        "question": "{{query}}",
        "history": "{{history}}",
        "product": "{{case.product}}",
    }
