"""TREC qrels and run files as pytrec_eval reads them, trec_eval measures, leaderboards."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import pytrec_eval

from monitor.errors import TrecFormatError
from monitor.reports.trec import (
    evaluate,
    format_qrels,
    format_run,
    leaderboard,
    read_qrels,
    read_ranking,
    read_run,
)

QRELS = {"q1": {"d1": 5, "d2": 0, "d3": 4}, "q2": {"kb-1042#2": 3, "a~b~p1": 1}}
RANKINGS = {"q1": [("d3", 9.5), ("d2", 3.0), ("d1", 1.25)], "q2": [("a~b~p1", 0.5)]}


def test_qrels_are_read_by_pytrec_eval_exactly_as_written(tmp_path: Path) -> None:
    text = format_qrels(QRELS)
    assert text.splitlines()[0] == "q1 0 d1 5"
    path = tmp_path / "qrels.txt"
    path.write_text(text, encoding="utf-8")
    with path.open() as f:
        assert pytrec_eval.parse_qrel(f) == QRELS
    assert read_qrels(path) == QRELS


def test_runs_are_read_by_pytrec_eval_exactly_as_written(tmp_path: Path) -> None:
    text = format_run(RANKINGS, "bm25")
    assert text.splitlines()[0] == "q1 Q0 d3 1 9.500000 bm25"
    path = tmp_path / "bm25.run"
    path.write_text(text, encoding="utf-8")
    expected = {q: dict(ranking) for q, ranking in RANKINGS.items()}
    with path.open() as f:
        assert pytrec_eval.parse_run(f) == expected
    assert read_run(path) == expected


def test_scores_that_do_not_fall_with_rank_are_replaced_keeping_the_order() -> None:
    text = format_run({"q": [("a", 1.0), ("b", 1.0), ("c", 2.0)]}, "s")
    assert [line.split()[2:5] for line in text.splitlines()] == [
        ["a", "1", "3.000000"],
        ["b", "2", "2.000000"],
        ["c", "3", "1.000000"],
    ]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: format_qrels({"q 1": {"d": 1}}), "query id 'q 1'"),
        (lambda: format_qrels({"q": {"": 1}}), "doc id ''"),
        (lambda: format_run({"q": [("d", 1.0)]}, "my system"), "system id"),
        (lambda: format_run({"q": [("d", 2.0), ("d", 1.0)]}, "s"), "ranked twice"),
    ],
)
def test_ids_a_trec_file_cannot_hold_are_refused(call: object, message: str) -> None:
    with pytest.raises(TrecFormatError, match=message):
        call()  # type: ignore[operator]


@pytest.mark.parametrize(
    "text", ["q1 0 d1\n", "q1 0 d1 x\n", "q1 0 d1 1\nq1 0 d1 2\n", "q1 0 d1 1\n\n"]
)
def test_bad_qrels_files_are_a_format_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.qrels"
    path.write_text(text)
    with pytest.raises(TrecFormatError, match="not a qrels file"):
        read_qrels(path)


def test_bad_run_files_are_a_format_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.run"
    path.write_text("q1 Q0 d1 1 notanumber s\n")
    with pytest.raises(TrecFormatError, match="not a run file"):
        read_run(path)


def test_measures_match_hand_computed_values() -> None:
    qrels = {"q": {"a": 2, "b": 0, "c": 1}}
    run = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}
    result = evaluate(qrels, run)
    # Relevant at ranks 1 and 3: AP = (1/1 + 2/3) / 2; P@10 = 2/10.
    assert result["map"] == pytest.approx((1 + 2 / 3) / 2)
    assert result["P_10"] == pytest.approx(0.2)
    dcg = 2 / math.log2(2) + 1 / math.log2(4)
    idcg = 2 / math.log2(2) + 1 / math.log2(3)
    assert result["ndcg_cut_10"] == pytest.approx(dcg / idcg)
    # relevance_level raises the bar for the binary measures only (nDCG uses the grades).
    strict = evaluate(qrels, run, relevance_level=2)
    assert strict["map"] == pytest.approx(1.0)
    assert strict["ndcg_cut_10"] == pytest.approx(result["ndcg_cut_10"])


def _runs() -> dict[str, dict[str, dict[str, float]]]:
    # Three systems whose quality is clearly ordered: good > mid > bad.
    return {
        "good": {"q": {"a": 3.0, "c": 2.0, "b": 1.0}},
        "mid": {"q": {"b": 3.0, "a": 2.0, "c": 1.0}},
        "bad": {"q": {"b": 3.0, "d": 2.0, "e": 1.0}},
    }


def test_leaderboard_against_reference_qrels_and_a_ranking() -> None:
    qrels = {"q": {"a": 5, "b": 0, "c": 4}}
    reference = {"q": {"a": 1, "b": 0, "c": 1}}
    board = leaderboard(qrels, _runs(), reference_qrels=reference)
    assert board.scores["good"]["map"] > board.scores["mid"]["map"] > board.scores["bad"]["map"]
    corr = board.correlations["map"]
    assert (corr.n, corr.spearman, corr.kendall) == (3, pytest.approx(1.0), pytest.approx(1.0))
    reversed_board = leaderboard(qrels, _runs(), reference_ranking=["bad", "mid", "good"])
    assert reversed_board.correlations["ndcg_cut_10"].spearman == pytest.approx(-1.0)
    with pytest.raises(TrecFormatError, match="missing from the reference ranking"):
        leaderboard(qrels, _runs(), reference_ranking=["good"])


def test_two_systems_give_no_correlation_but_say_why() -> None:
    runs = _runs()
    del runs["bad"]
    board = leaderboard({"q": {"a": 5}}, runs, reference_ranking=["good", "mid"])
    assert board.correlations["map"].spearman is None
    assert "n = 2 < 3" in board.correlations["map"].notes[0]


def test_reference_ranking_file() -> None:
    assert read_ranking(["# best first", "good", "", "mid  # comment"]) == ["good", "mid"]
    with pytest.raises(TrecFormatError, match="twice"):
        read_ranking(["a", "a"])
