import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from scipy import stats as st

from monitor.schema.turn import METRICS, Assistant, Verdict
from monitor.stats.paired import by_conversation, paired_test, rank_correlation


def _verdict(event_id: str, conversation: str, score: float | None) -> Verdict:
    assistant = Assistant(name="bot", version="1", model="m")
    if score is None:
        return Verdict(
            event_id=event_id,
            conversation_id=conversation,
            turn_index=0,
            assistant=assistant,
            status="judge_failed",
            failure_reason="timeout",
            weight_profile="default",
        )
    return Verdict(
        event_id=event_id,
        conversation_id=conversation,
        turn_index=0,
        assistant=assistant,
        status="ok",
        weight_profile="default",
        s_final=score,
        metric_scores=dict.fromkeys(METRICS, score),
    )


def test_constant_shift_gives_the_shift_and_a_ci_on_it() -> None:
    a = [0.2, 0.35, 0.5, 0.61, 0.7, 0.8]
    b = [x + 0.1 for x in a]
    t = paired_test(a, b)
    assert t.n == 6
    assert t.mean_delta == pytest.approx(0.1)
    assert t.ci_low == pytest.approx(0.1) and t.ci_high == pytest.approx(0.1)
    # Exact Wilcoxon: all six differences positive → p = 2 / 2**6.
    assert t.wilcoxon_p == pytest.approx(2 / 2**6)
    assert t.t_p is None
    assert any("constant" in n for n in t.notes)


def test_noisy_shift_matches_scipy_and_the_ci_contains_the_shift() -> None:
    rng = np.random.default_rng(7)
    a = rng.uniform(0.3, 0.7, size=40)
    b = a + 0.05 + rng.normal(0, 0.02, size=40)
    t = paired_test(list(a), list(b))
    assert t.mean_delta == pytest.approx(float(np.mean(b - a)))
    assert t.wilcoxon_p == pytest.approx(st.wilcoxon(b - a).pvalue)
    assert t.t_p == pytest.approx(st.ttest_rel(b, a).pvalue)
    assert t.ci_low is not None and t.ci_high is not None
    assert t.ci_low < 0.05 < t.ci_high
    assert t.ci_method == "bootstrap-BCa"
    assert t.notes == ()


def test_bootstrap_is_reproducible() -> None:
    a, b = [0.1, 0.4, 0.3, 0.9, 0.5], [0.2, 0.3, 0.6, 0.8, 0.9]
    assert paired_test(a, b) == paired_test(a, b)


def test_identical_inputs_give_a_note_not_a_test() -> None:
    a = [0.5, 0.6, 0.7]
    t = paired_test(a, list(a))
    assert t.mean_delta == 0.0
    assert t.wilcoxon_p is None and t.t_p is None
    assert t.ci_low == 0.0 and t.ci_high == 0.0
    assert "all differences are zero" in t.notes[0]


def test_float_noise_is_not_a_difference() -> None:
    a = [0.1 + 0.2, 0.7]
    b = [0.3, 0.7]  # 0.1 + 0.2 != 0.3 in binary floating point
    assert "all differences are zero" in paired_test(a, b).notes[0]


@pytest.mark.parametrize(("a", "b", "note"), [([], [], "no pairs"), ([0.5], [0.7], "n < 2")])
def test_too_few_pairs(a: list[float], b: list[float], note: str) -> None:
    t = paired_test(a, b)
    assert t.wilcoxon_p is None
    assert note in t.notes[0]


def test_unequal_lengths_are_a_bug() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        paired_test([0.1], [0.1, 0.2])


@settings(max_examples=25, deadline=None)
@given(
    hs.lists(
        hs.tuples(hs.floats(0, 1), hs.floats(0, 1)),
        max_size=8,
    )
)
def test_paired_test_never_crashes_and_p_values_are_probabilities(
    pairs: list[tuple[float, float]],
) -> None:
    t = paired_test([p[0] for p in pairs], [p[1] for p in pairs])
    for p in (t.wilcoxon_p, t.t_p):
        assert p is None or 0.0 <= p <= 1.0
    if t.ci_low is not None:
        assert t.ci_high is not None and t.ci_low <= t.ci_high


def test_monotone_data_has_rank_correlation_one() -> None:
    x = [0.1, 0.2, 0.4, 0.8, 0.9]
    c = rank_correlation(x, [math.exp(v) for v in x])
    assert c.spearman == pytest.approx(1.0)
    assert c.kendall == pytest.approx(1.0)
    assert c.spearman_p is not None and c.spearman_p < 0.05
    reversed_c = rank_correlation(x, [-v for v in x])
    assert reversed_c.spearman == pytest.approx(-1.0)


def test_constant_series_and_tiny_samples_have_no_correlation() -> None:
    assert rank_correlation([0.5, 0.5, 0.5], [0.1, 0.2, 0.3]).spearman is None
    assert "constant" in rank_correlation([0.5, 0.5, 0.5], [0.1, 0.2, 0.3]).notes[0]
    assert rank_correlation([0.1, 0.2], [0.1, 0.2]).notes[0].startswith("n = 2")


def test_by_conversation_means_scored_turns_and_counts_failures() -> None:
    verdicts = [
        _verdict("e1", "c1", 0.4),
        _verdict("e2", "c1", 0.8),
        _verdict("e3", "c1", None),
        _verdict("e4", "c2", None),
        _verdict("e5", "c3", 1.0),
    ]
    scores = by_conversation(verdicts)
    assert scores.s_final == pytest.approx({"c1": 0.6, "c3": 1.0})
    assert "c2" not in scores.s_final  # every turn failed: nothing to average
    assert scores.metrics["hallucination"]["c1"] == pytest.approx(0.6)
    assert (scores.turns_scored, scores.turns_failed) == (3, 2)


def test_by_conversation_can_reweight() -> None:
    v = _verdict("e1", "c1", 0.5).model_copy(
        update={"metric_scores": {**dict.fromkeys(METRICS, 0.0), "hallucination": 1.0}}
    )
    only_hallucination = {**dict.fromkeys(METRICS, 0.0), "hallucination": 1.0}
    assert by_conversation([v]).s_final["c1"] == 0.5  # as judged
    assert by_conversation([v], only_hallucination).s_final["c1"] == 1.0
