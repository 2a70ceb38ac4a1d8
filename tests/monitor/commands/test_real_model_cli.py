"""``casewatch judge`` (one judge, and a panel with an arbiter), ``casewatch pairwise`` and
``casewatch rubric grade`` against a real OpenAI-compatible server: llama-cpp-python on
SmolLM2-135M (tests/model_server.py). Few turns and short replies (16 tokens: a whole judgment
by this model is longer than 400, minutes per turn on a busy 2-core machine) keep it to
minutes; what is checked is that every turn, pair and passage ends accounted for, never a
score.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from monitor.cli import main
from monitor.judging.judge import FAILURE_REASONS
from monitor.judging.panel import PANEL_INSUFFICIENT
from monitor.judging.rubric_prompt import PARSE_PATHS
from monitor.schema.turn import METRICS
from tests.fixtures.model_server import real_judge_values
from tests.model_server import RealModelServer

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def run(*args: object) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def write_config(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "casewatch.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def first_turns(tmp_path: Path, n: int, name: str = "turns.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join((EXAMPLES / "turns.jsonl").read_text().splitlines()[:n]) + "\n")
    return path


def verdicts(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def assert_accounted(rows: list[dict[str, Any]], event_ids: set[str]) -> None:
    """Each input turn has exactly one verdict: all eight metrics, or judge_failed with a
    reason from the bounded set."""
    assert sorted(r["event_id"] for r in rows) == sorted(event_ids)
    for row in rows:
        if row["status"] == "ok":
            assert set(row["metric_scores"]) == set(METRICS)
        else:
            assert row["status"] == "judge_failed"
            assert row["failure_reason"] in (*FAILURE_REASONS, PANEL_INSUFFICIENT)
        for judgment in row["judgments"]:
            assert judgment["status"] == "ok" or judgment["failure_reason"] in FAILURE_REASONS


SHORT = {"max_output_tokens": 16, "output_retries": 0}


def test_judge_on_examples(real_model: RealModelServer, tmp_path: Path) -> None:
    turns = first_turns(tmp_path, 2)
    config = write_config(tmp_path, {"judges": {"smollm2": real_judge_values(real_model, **SHORT)}})
    out = tmp_path / "out.jsonl"
    result = run(
        "judge",
        turns,
        "--out",
        out,
        "--judge",
        "smollm2",
        "--config",
        config,
        "--no-progress",
        "--json",
    )
    # Every reply is cut at 16 tokens: each turn ends truncated, and the run says so (exit 1).
    assert result.exit_code == 1, result.output
    assert "ended judge_failed" in result.output
    summary = json.loads(result.stdout.splitlines()[0])
    assert (summary["read"], summary["judged"], summary["rejected"]) == (2, 2, 0)
    ids = {json.loads(line)["event_id"] for line in turns.read_text().splitlines()}
    rows = verdicts(out)
    assert_accounted(rows, ids)
    for row in rows:
        (judgment,) = row["judgments"]
        assert judgment["failure_reason"] == "truncated"
        assert judgment["model"] == "smollm2-135m" and judgment["input_tokens"] > 1000


def test_panel_with_an_arbiter(real_model: RealModelServer, tmp_path: Path) -> None:
    """The real model and the offline heuristic as the two primaries, an offline arbiter: the
    real model's reply is cut (truncated), so the arbiter is asked (primary_failed) and the
    verdict is the mean of the two that answered, with all three judgments kept."""
    turns = first_turns(tmp_path, 1)
    config = write_config(
        tmp_path,
        {
            "judges": {
                "smollm2": real_judge_values(real_model, **SHORT),
                "offline-arbiter": {"kind": "heuristic"},
            },
            "panel": {"primaries": ["smollm2", "heuristic"], "arbiter": "offline-arbiter"},
        },
    )
    out = tmp_path / "out.jsonl"
    result = run("judge", turns, "--out", out, "--config", config, "--no-progress", "--json")
    assert result.exit_code == 0, result.output
    (row,) = verdicts(out)
    assert_accounted([row], {row["event_id"]})
    assert row["status"] == "ok" and row["arbitrated"]
    assert row["arbitration_trigger"] == "primary_failed"
    reasons = {j["judge"]: j["failure_reason"] for j in row["judgments"]}
    assert reasons == {"smollm2": "truncated", "heuristic": None, "offline-arbiter": None}


def test_pairwise_reads_the_decision_logprobs(real_model: RealModelServer, tmp_path: Path) -> None:
    stable = tmp_path / "stable.jsonl"
    canary = tmp_path / "canary.jsonl"
    stable.write_text((EXAMPLES / "turns-stable.jsonl").read_text().splitlines()[0] + "\n")
    canary.write_text((EXAMPLES / "turns-canary.jsonl").read_text().splitlines()[0] + "\n")
    config = write_config(
        tmp_path, {"judges": {"pw": real_judge_values(real_model, max_output_tokens=16)}}
    )
    out = tmp_path / "pairs.jsonl"
    result = run(
        "pairwise", stable, canary, "--judge", "pw", "--config", config, "--out", out, "--json"
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["questions"] == 1 and sum(doc["outcomes"].values()) == 1
    # Every decided order carries the server's logprobs: hard or soft, never "unknown".
    assert set(doc["confidence"]) <= {"hard", "soft"}
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    for row in rows:
        if row["status"] != "ok":
            assert row["failure_reason"] in FAILURE_REASONS
            continue
        for order in (row["forward"], row["swapped"]):
            assert order["top_logprobs"] and order["kind"] in ("hard", "soft")
            assert abs(sum(order["probabilities"].values()) - 1.0) < 1e-9


RUBRICS = """\
- id: vpn
  query: VPN drops every few minutes
  reviewed: true
  questions:
    - Which MTU is recommended?
"""


def test_rubric_grading(real_model: RealModelServer, tmp_path: Path) -> None:
    rubrics = tmp_path / "rubrics.yaml"
    rubrics.write_text(RUBRICS)
    responses = tmp_path / "responses.jsonl"
    answer = {"system": "bot", "query": "vpn", "answer": "Set MTU 1400 and reinstall the driver."}
    responses.write_text(json.dumps(answer) + "\n")
    config = write_config(
        tmp_path,
        {
            "judges": {"grader": real_judge_values(real_model, max_output_tokens=32)},
            "rubric": {"judge": "grader", "concurrency": 2},
        },
    )
    out = tmp_path / "out"
    result = run("rubric", "grade", rubrics, responses, "--out-dir", out, "--config", config)
    assert result.exit_code == 0, result.output
    (graded,) = [json.loads(line) for line in (out / "grades.jsonl").read_text().splitlines()]
    assert [g["question"] for g in graded["grades"]] == ["Which MTU is recommended?"]
    for grade in graded["grades"]:
        assert 0 <= grade["grade"] <= 5 and grade["path"] in PARSE_PATHS
    assert (out / "qrels.txt").read_text().count("\n") == 1
