"""``casewatch pairwise`` and ``casewatch tournament`` end to end (heuristic and fake judge)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner, Result

from monitor.commands.pairwise import pairwise_command, tournament_command
from tests.fake_judge_server import FakeJudgeServer, pairwise
from tests.support.cli_judging import EXAMPLES, TIE, system_file

HARD_A = {"A": math.log(0.83), "Tie": math.log(0.16), "B": math.log(1e-6)}
HARD_B = {"B": math.log(0.83), "Tie": math.log(0.16), "A": math.log(1e-6)}


def run(command: Any, *args: object) -> Result:
    return CliRunner().invoke(command, [str(a) for a in args])


def config_for(server: FakeJudgeServer, tmp_path: Path) -> Path:
    path = tmp_path / "casewatch.yaml"
    judge = {"base_url": server.base_url, "model": "fake-judge", "transport_retries": 0}
    path.write_text(yaml.safe_dump({"judges": {"pw": judge}}))
    return path


def by_quality(pair: dict[str, Any]) -> dict[str, float]:
    a, b = (int(re.search(r"quality (\d+)", pair[k]).group(1)) for k in ("answer_a", "answer_b"))  # type: ignore[union-attr]
    return TIE if a == b else HARD_A if a > b else HARD_B


def test_pairwise_on_the_examples_with_the_offline_judge() -> None:
    result = run(
        pairwise_command,
        EXAMPLES / "turns-stable.jsonl",
        EXAMPLES / "turns-canary.jsonl",
        "--json",
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["questions"] == 72 and doc["judge"] == "heuristic"
    assert sum(doc["outcomes"].values()) == 72 and doc["outcomes"]["failed"] == 0
    low, high = doc["win_rate_ci95"]
    assert low < doc["win_rate"] < high
    assert doc["win_rate"] > 0.5  # the stable assistant is the better one (examples/README.md)
    assert doc["confidence"] == {"unknown": 144}


def test_pairwise_with_a_logprob_judge(fake_judge: FakeJudgeServer, tmp_path: Path) -> None:
    fake_judge.responder = pairwise(by_quality)
    a, b = system_file(tmp_path, "good", 3), system_file(tmp_path, "bad", 1)
    out = tmp_path / "judgments.jsonl"
    result = run(
        pairwise_command,
        a,
        b,
        "--judge",
        "pw",
        "--config",
        config_for(fake_judge, tmp_path),
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    assert "A wins 3, ties 0, loses 0, failed 0" in result.output
    assert "A's win rate (ties count half): 1.000" in result.output
    assert "'hard': 6" in result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3 and rows[0]["swapped"]["label"] == "B"


def test_pairwise_refuses_bad_input_naming_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    good = EXAMPLES / "turns-stable.jsonl"
    bad.write_text(good.read_text().splitlines()[0] + "\n" + '{"event_id": "x"}\n')
    result = run(pairwise_command, good, bad)
    assert result.exit_code == 2
    assert f"{bad}:2: not a valid turn event" in result.output
    other = system_file(tmp_path, "other", 1)
    lonely = tmp_path / "lonely.jsonl"
    doc = json.loads(other.read_text().splitlines()[0])
    doc["conversation_id"] = "nowhere"
    lonely.write_text(json.dumps(doc) + "\n")
    result = run(pairwise_command, other, lonely)
    assert result.exit_code == 2 and "share no" in result.output


def test_tournament_ranks_systems_and_plots(fake_judge: FakeJudgeServer, tmp_path: Path) -> None:
    fake_judge.responder = pairwise(by_quality)
    files = [system_file(tmp_path, f"sys{q}", q, turns=2) for q in (2, 5, 1, 4, 3)]
    config = config_for(fake_judge, tmp_path)
    png = tmp_path / "ratings.png"
    result = run(
        tournament_command,
        *files,
        "--judge",
        "pw",
        "--config",
        config,
        "--json",
        "--plot",
        png,
        "--resamples",
        50,
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["scheme"] == "swiss" and doc["rounds"] == 4  # ceil(log2 5) + 1
    assert doc["matches"] == 4 * 2  # 5 systems: two matches and a bye a round
    ranking = [r["system"] for r in doc["ranking"]]
    assert ranking[0] == "sys5" and ranking[-1] == "sys1"
    for row in doc["ranking"]:
        assert row["ci95"][0] <= row["rating"] <= row["ci95"][1]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000

    rr = run(
        tournament_command,
        *files[:4],
        "--round-robin",
        "--judge",
        "pw",
        "--config",
        config,
        "--resamples",
        20,
    )
    assert rr.exit_code == 0, rr.output
    assert "round-robin: 1 rounds, 6 matches, 2 questions" in rr.output
    lines = [line.split() for line in rr.output.splitlines()[1:5]]
    assert [line[1] for line in lines] == ["sys5", "sys4", "sys2", "sys1"]


def test_tournament_needs_two_systems(tmp_path: Path) -> None:
    result = run(tournament_command, system_file(tmp_path, "solo", 1))
    assert result.exit_code == 2 and "at least two systems" in result.output
