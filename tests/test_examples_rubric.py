"""The rubric example in examples/rubric/: reproducible inputs, and qrels/run files that the
grading command writes again from them (with the gold-answer stand-in grader)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from monitor.cli import main
from monitor.judging.rubric_set import load_rubric_set
from monitor.reports.trec import leaderboard, read_qrels, read_run
from tests.fake_judge_server import FakeJudgeServer, gold_answer_grader
from tests.fixtures.judge_server import FAKE_JUDGE_KEY, FAKE_JUDGE_MODEL

RUBRIC = Path(__file__).resolve().parents[1] / "examples" / "rubric"
BUILT = ["rubrics.yaml", "reference-qrels.txt"]
BUILT += [f"responses-{s}.jsonl" for s in ("oracle", "production", "lexical", "random")]


def test_committed_inputs_equal_a_fresh_build(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(RUBRIC / "build.py"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    for name in BUILT:
        assert (tmp_path / name).read_bytes() == (RUBRIC / name).read_bytes(), name


def test_the_rubric_set_is_reviewed_and_has_a_gold_answer_per_question() -> None:
    rubrics = load_rubric_set(RUBRIC / "rubrics.yaml")
    assert len(rubrics.entries) == 24 and rubrics.unreviewed == []
    assert all(q.gold_answer for e in rubrics.entries for q in e.questions)


def test_grading_two_variants_again_gives_the_committed_qrels_and_runs(tmp_path: Path) -> None:
    rubrics = load_rubric_set(RUBRIC / "rubrics.yaml")
    gold = {q.question: q.gold_answer or "" for e in rubrics.entries for q in e.questions}
    with FakeJudgeServer(gold_answer_grader(gold)) as server:
        config = tmp_path / "grader.yaml"
        key = tmp_path / "judge-key"
        key.write_text(FAKE_JUDGE_KEY)
        config.write_text(
            f"judges:\n  grader:\n    kind: openai\n    base_url: {server.base_url}\n"
            f"    model: {FAKE_JUDGE_MODEL}\n    api_key_file: {key}\n"
            "rubric:\n  judge: grader\n  concurrency: 8\n"
        )
        result = CliRunner().invoke(
            main,
            [
                "rubric",
                "grade",
                str(RUBRIC / "rubrics.yaml"),
                str(RUBRIC / "responses-oracle.jsonl"),
                str(RUBRIC / "responses-production.jsonl"),
                "--out-dir",
                str(tmp_path / "out"),
                "--config",
                str(config),
            ],
        )
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    for system in ("oracle", "production"):
        assert (out / f"{system}.run").read_bytes() == (RUBRIC / f"{system}.run").read_bytes()
    fresh = read_qrels(out / "qrels.txt")
    committed = read_qrels(RUBRIC / "qrels.txt")
    assert fresh == {q: {d: committed[q][d] for d in docs} for q, docs in fresh.items()}


def test_the_committed_leaderboard_agrees_with_the_reference() -> None:
    runs = {s: read_run(RUBRIC / f"{s}.run") for s in ("oracle", "lexical", "production", "random")}
    board = leaderboard(
        read_qrels(RUBRIC / "qrels.txt"),
        runs,
        reference_qrels=read_qrels(RUBRIC / "reference-qrels.txt"),
    )
    order = sorted(runs, key=lambda s: -board.scores[s]["ndcg_cut_10"])
    assert order == ["oracle", "lexical", "production", "random"]
    assert board.correlations["ndcg_cut_10"].spearman == 1.0
