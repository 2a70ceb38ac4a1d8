"""The ``baseline:`` settings section (scheduled baseline-tier checks)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from monitor.config.settings import load_settings
from monitor.errors import ConfigError


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


def test_the_docs_baseline_example_loads(tmp_path: Path) -> None:
    page = Path(__file__).resolve().parents[3] / "docs" / "pairwise.md"
    blocks = re.findall(r"```yaml\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
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


def test_assistant_tokens_are_read_once_and_redacted_from_logs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Read when the settings are built (the entrypoint); the client never reads the env.
    monkeypatch.setenv("CASEWATCH_TEST_BOT_TOKEN", "tok-123")
    endpoint = {"kind": "openai", "url": "http://127.0.0.1:9/v1", "model": "m"}
    settings = load_settings(
        baseline={
            "assistants": [
                {"name": "bot", "endpoint": {**endpoint, "api_key_env": "CASEWATCH_TEST_BOT_TOKEN"}}
            ]
        }
    )
    monkeypatch.delenv("CASEWATCH_TEST_BOT_TOKEN")
    bot = settings.baseline.assistants[0].endpoint
    assert bot is not None and bot.resolve_api_key() == "tok-123"
    assert "tok-123" in settings.secret_values()
