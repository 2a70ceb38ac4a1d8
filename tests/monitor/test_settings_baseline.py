"""The ``baseline:`` settings section (scheduled baseline-tier checks)."""

from __future__ import annotations

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
