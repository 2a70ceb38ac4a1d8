"""DICE §3.2 scoring: softmax over {A, B, Tie}, ΔP threshold, hard/soft/unknown, swaps."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.judging.pairwise_scoring import (
    PairScore,
    combine_orders,
    label_flip_rate,
    label_logprobs,
    outcome_of,
    parse_label,
    position_disagreement,
    score_label,
    score_logprobs,
    score_probabilities,
    softmax,
)


def test_seed_appendix_example_is_a_hard_win_for_a() -> None:
    # Appendix A: P(A)=0.83, P(B)=0.00, P(Tie)=0.16 -> confidence 0.67 -> scores A=1.0, B=0.0.
    top = [("A", math.log(0.83)), ("Tie", math.log(0.16)), ("B", math.log(1e-6))]
    score = score_logprobs(top)
    assert score is not None
    assert score.probabilities is not None
    assert score.probabilities["A"] == pytest.approx(0.83, abs=0.01)
    assert score.probabilities["B"] == pytest.approx(0.0, abs=0.001)
    assert score.probabilities["Tie"] == pytest.approx(0.16, abs=0.01)
    assert score.delta_p == pytest.approx(0.67, abs=0.01)
    assert (score.score_a, score.score_b, score.kind, score.label) == (1.0, 0.0, "hard", "A")


def test_soft_score_computed_by_hand() -> None:
    # ΔP = 0.40 - 0.35 = 0.05 < 0.1: the tie mass is shared in proportion to p_A : p_B.
    # A = 0.40 + 0.25 * 0.40 / 0.75 = 0.5333..., B = 0.35 + 0.25 * 0.35 / 0.75 = 0.4666...
    top = [("A", math.log(0.40)), ("B", math.log(0.35)), ("Tie", math.log(0.25))]
    score = score_logprobs(top)
    assert score is not None
    assert score.kind == "soft"
    assert score.score_a == pytest.approx(0.40 + 0.25 * 0.40 / 0.75)
    assert score.score_a == pytest.approx(8 / 15)
    assert score.score_b == pytest.approx(7 / 15)
    assert score.label == "A"


def test_missing_label_gets_the_floor_of_the_returned_logprobs() -> None:
    # "Tie" is not among the top logprobs: it gets -3.0, the lowest returned (token "The").
    top = [("A", -0.5), ("B", -1.0), ("The", -3.0)]
    assert label_logprobs(top) == {"A": -0.5, "B": -1.0, "Tie": -3.0}
    score = score_logprobs(top)
    assert score is not None and score.probabilities is not None
    total = math.exp(-0.5) + math.exp(-1.0) + math.exp(-3.0)
    assert score.probabilities["Tie"] == pytest.approx(math.exp(-3.0) / total)
    assert score.kind == "hard" and score.label == "A"


def test_tokens_are_matched_leniently_but_only_as_whole_labels() -> None:
    top = [(" A", -0.1), ("a", -0.3), ("TIE", -2.0), ("Answer", -4.0)]
    # " A" and "a" are the same decision: the more likely stands for it.
    assert label_logprobs(top) == {"A": -0.1, "B": -4.0, "Tie": -2.0}
    assert label_logprobs([("The", -0.1), ("Both", -1.0)]) is None
    assert score_logprobs([("The", -0.1)]) is None


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("A", "A"),
        (" b\n", "B"),
        ("tie", "Tie"),
        ("**Tie**", "Tie"),
        ('"A".', "A"),
        ("[B]", "B"),
        ("A or B", None),
        ("Answer A", None),
        ("", None),
        (None, None),
        ("C", None),
    ],
)
def test_parse_label(text: str | None, label: str | None) -> None:
    assert parse_label(text) == label


def test_hard_threshold_is_inclusive() -> None:
    score = score_probabilities({"A": 0.45, "B": 0.35, "Tie": 0.20})
    assert score.kind == "hard" and (score.score_a, score.score_b) == (1.0, 0.0)
    tie = score_probabilities({"A": 0.2, "B": 0.2, "Tie": 0.6})
    assert (tie.score_a, tie.score_b, tie.label) == (0.5, 0.5, "Tie")


def test_no_logprobs_gives_unknown_confidence_from_the_label() -> None:
    assert score_label("B") == PairScore(0.0, 1.0, "unknown", "B")
    assert (score_label("Tie").score_a, score_label("Tie").kind) == (0.5, "unknown")


def test_bad_probabilities_are_refused() -> None:
    with pytest.raises(ValueError, match="need all"):
        score_probabilities({"A": 0.5, "B": 0.5})  # type: ignore[typeddict-item]
    with pytest.raises(ValueError, match="non-negative"):
        score_probabilities({"A": -0.1, "B": 0.6, "Tie": 0.5})


def test_swapped_order_is_mapped_back_and_averaged() -> None:
    forward = score_label("A")  # the first-named answer, shown as A, wins
    agrees = score_label("B")  # swapped: first-named answer shown as B, and B wins
    combined = combine_orders(forward, agrees)
    assert (combined.score_a, combined.score_b, combined.disagreement) == (1.0, 0.0, 0.0)
    assert not combined.label_flipped and combined.outcome == "win"

    biased = score_label("A")  # swapped: whichever answer is shown first wins
    flipped = combine_orders(forward, biased)
    assert (flipped.score_a, flipped.score_b, flipped.disagreement) == (0.5, 0.5, 1.0)
    assert flipped.label_flipped and flipped.outcome == "tie"
    assert position_disagreement([combined, flipped]) == 0.5
    assert label_flip_rate([combined, flipped]) == 0.5


def test_soft_orders_average_and_disagreement_is_the_score_gap() -> None:
    forward = score_probabilities({"A": 0.40, "B": 0.35, "Tie": 0.25})  # first-named 8/15
    swapped = score_probabilities({"A": 0.35, "B": 0.40, "Tie": 0.25})  # first-named 8/15
    combined = combine_orders(forward, swapped)
    assert combined.score_a == pytest.approx(8 / 15)
    assert combined.disagreement == pytest.approx(0.0)
    assert combined.kinds == ("soft", "soft")


def test_unswapped_pairs_have_no_position_figure() -> None:
    single = combine_orders(score_label("B"), None)
    assert single.outcome == "loss" and single.kinds == ("unknown",)
    assert position_disagreement([single]) is None
    assert label_flip_rate([]) is None


def test_outcomes() -> None:
    assert [outcome_of(x) for x in (1.0, 0.5, 0.5 + 1e-12, 0.49, 0.51)] == [
        "win",
        "tie",
        "tie",
        "loss",
        "win",
    ]


logprob = st.floats(min_value=-30.0, max_value=0.0, allow_nan=False)


@given(logprob, logprob, logprob)
def test_scores_are_a_distribution_of_one_point(la: float, lb: float, lt: float) -> None:
    p = softmax({"A": la, "B": lb, "Tie": lt})
    assert sum(p.values()) == pytest.approx(1.0)
    score = score_probabilities(p)
    assert score.score_a + score.score_b == pytest.approx(1.0)
    assert 0.0 <= score.score_a <= 1.0
    # Swapping the labels swaps the scores (no label is favoured by the rule itself).
    mirrored = score_probabilities({"A": p["B"], "B": p["A"], "Tie": p["Tie"]})
    assert mirrored.score_a == pytest.approx(score.score_b)
