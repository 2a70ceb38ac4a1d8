"""`casewatch judge` pseudonymizes turns before the judge sees them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from monitor.commands.batch import judge_command
from tests.fake_judge_server import FakeJudgeServer
from tests.support.turn_lines import dump, turn, write_lines

EMAIL = "jane.doe@example.com"
CARD = "4111 1111 1111 1111"


def _config(tmp_path: Path, judge: FakeJudgeServer, **redaction: object) -> Path:
    config = {
        "judge": "remote",
        "judges": {
            "remote": {
                "kind": "openai",
                "base_url": judge.base_url,
                "model": "fake-judge",
                "api_key_env": "FAKE_JUDGE_KEY",
                "timeout_seconds": 5,
            }
        },
        "redaction": redaction,
    }
    path = tmp_path / "casewatch.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("enabled", [True, False])
def test_the_judge_sees_placeholders_unless_redaction_is_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, enabled: bool
) -> None:
    monkeypatch.setenv("FAKE_JUDGE_KEY", "k")
    raw = turn("e-1", "c-1", 0, answer=f"Refunded {CARD}; receipt to {EMAIL}.")
    raw["query"] = f"Was {CARD} refunded? I am {EMAIL}"
    src = write_lines(tmp_path / "in.jsonl", [dump(raw)])
    out = tmp_path / "out.jsonl"
    with FakeJudgeServer() as judge:
        config = _config(tmp_path, judge, enabled=enabled)
        args = [str(src), "--out", str(out), "--config", str(config), "--no-progress", "--json"]
        result = CliRunner().invoke(judge_command, args)
        assert result.exit_code == 0, result.output
        bodies = "\n".join(b.decode() for b in judge.request_bodies)
        # the case data (the prompt's own text names example placeholders)
        data = "\n".join(json.loads(b)["messages"][-1]["content"] for b in judge.request_bodies)
    assert json.loads(result.stdout)["judged"] == 1
    assert (EMAIL in bodies, CARD in bodies) == (not enabled, not enabled)
    assert ("EMAIL_1" in data) == enabled
