"""`casewatch judge` and `casewatch agreement` with a two-primary panel and an arbiter.

Three judges share the fake OpenAI-compatible server (told apart by ``model``); the primaries
disagree exactly on the turns whose query hashes into a known subset, so the arbiter's share
of calls is known in advance.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from monitor.cli import main
from monitor.schema.turn import METRICS
from tests.fake_judge_server import FakeJudgeServer, Reply, case_data_of, scores

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def disputed(query: str) -> bool:
    return int(hashlib.sha256(query.encode()).hexdigest(), 16) % 4 == 0


def respond(request: dict[str, Any]) -> Reply:
    data = case_data_of(request)
    assert data is not None
    if request["model"] == "judge-a":
        return scores(0.9)
    if request["model"] == "judge-b":
        hit = disputed(str(data["query"]))
        return scores({m: (0.1 if hit and m == "hallucination" else 0.92) for m in METRICS})
    return scores(0.5)


def test_panel_judge_then_agreement_reports_before_and_after(tmp_path: Path) -> None:
    turns = [json.loads(line) for line in (EXAMPLES / "turns.jsonl").read_text().splitlines()]
    label_lines = (EXAMPLES / "human_labels.jsonl").read_text().splitlines()
    labelled = {json.loads(x)["event_id"] for x in label_lines}
    sample = [t for t in turns if t["event_id"] in labelled][:24]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(t) + "\n" for t in sample))
    expected_disputes = sum(disputed(t["query"]) for t in sample)
    assert 0 < expected_disputes < len(sample)

    with FakeJudgeServer(responder=respond) as server:
        judge = {
            "kind": "openai",
            "base_url": server.base_url,
            # no key: the fake server checks none (keys never go in a config file)
            "transport_retries": 0,
            "output_retries": 0,
            "price_input_per_mtok": 1.0,
        }
        config = {
            "judges": {n: {**judge, "model": n} for n in ("judge-a", "judge-b", "judge-arbiter")},
            "panel": {"primaries": ["judge-a", "judge-b"], "arbiter": "judge-arbiter"},
        }
        (tmp_path / "cw.yaml").write_text(yaml.safe_dump(config))
        runner = CliRunner()
        out = tmp_path / "out.jsonl"
        result = runner.invoke(
            main,
            [
                "judge",
                str(tmp_path / "in.jsonl"),
                "--out",
                str(out),
                "--config",
                str(tmp_path / "cw.yaml"),
                "--no-progress",
            ],
        )
        assert result.exit_code == 0, result.output
        arbiter_requests = sum(r["model"] == "judge-arbiter" for r in server.requests)
    assert arbiter_requests == expected_disputes

    verdicts = [json.loads(x) for x in out.read_text().splitlines()]
    assert sum(v["arbitrated"] for v in verdicts) == expected_disputes
    assert all(len(v["judgments"]) == (3 if v["arbitrated"] else 2) for v in verdicts)

    labels = str(EXAMPLES / "human_labels.jsonl")
    result = runner.invoke(main, ["agreement", str(out), "--labels", labels, "--json"])
    assert result.exit_code == 0, result.output
    panel = json.loads(result.output)["panel"]
    assert panel["arbiter_calls"] == expected_disputes
    assert panel["arbiter_call_share"] == expected_disputes / len(sample)

    table = runner.invoke(main, ["agreement", str(out), "--labels", labels])
    assert table.exit_code == 0, table.output
    assert "before arb." in table.output and "after arb." in table.output
    assert "arbiter calls" in table.output
