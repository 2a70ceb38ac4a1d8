import json

import pytest

from monitor.schema.turn import METRICS, Assistant, Band, Verdict
from monitor.scoring import turn as scoring
from monitor.stats.agreement import BANDS, agreement, band_agreement, judge_agreement


def _verdict(event_id: str, scores: dict[str, float] | None, conversation: str = "c") -> Verdict:
    base = {
        "event_id": event_id,
        "conversation_id": conversation,
        "turn_index": 0,
        "assistant": Assistant(name="bot", version="1", model="m"),
        "weight_profile": "default",
    }
    if scores is None:
        return Verdict(**base, status="judge_failed", failure_reason="timeout")
    weights = scoring.DEFAULT_PROFILE
    return Verdict(
        **base,
        status="ok",
        s_final=scoring.s_final(scores, weights),
        turn_band=scoring.turn_band(scores, weights),
        metric_scores=scores,
        metric_bands=scoring.metric_bands(scores),
    )


# A score in the middle of each band.
MID = {Band.SEVERE: 0.1, Band.MODERATE: 0.45, Band.MINOR: 0.7, Band.NONE: 0.95}


def test_identical_labels_have_kappa_one() -> None:
    bands = ["severe", "moderate", "minor", "none", "none", "minor"]
    a = band_agreement("hallucination", bands, list(bands))
    assert a.accuracy == 1.0 and a.kappa == pytest.approx(1.0) and a.macro_f1 == 1.0
    assert a.problem_accuracy == 1.0
    assert [list(r) for r in a.confusion] == [
        [1, 0, 0, 0],
        [0, 1, 0, 0],
        [0, 0, 2, 0],
        [0, 0, 0, 2],
    ]


def test_known_confusion() -> None:
    human = ["severe", "severe", "none", "none"]
    judge = ["severe", "moderate", "none", "minor"]
    a = band_agreement("m", human, judge)
    assert a.accuracy == 0.5
    # Both severe→moderate and none→minor keep the problem/no-problem side: binary is perfect.
    assert a.problem_accuracy == 1.0
    assert a.confusion[0] == (1, 1, 0, 0)  # human severe: judged severe once, moderate once
    assert a.confusion[3] == (0, 0, 1, 1)
    assert a.kappa is not None and a.kappa < 1.0


def test_a_single_band_everywhere_has_no_kappa() -> None:
    a = band_agreement("m", ["none", "none"], ["none", "none"])
    assert a.accuracy == 1.0 and a.kappa is None
    assert "kappa undefined" in a.notes[0]


def test_agreement_matches_verdicts_to_labels() -> None:
    verdicts = [
        _verdict("e1", {m: MID[Band.NONE] for m in METRICS}),
        _verdict("e2", {**{m: MID[Band.NONE] for m in METRICS}, "hallucination": 0.1}),
        _verdict("e3", None),
    ]
    labels = {
        "e1": {"hallucination": Band.NONE, "turn_band": Band.NONE, "tone": Band.NONE},
        "e2": {"hallucination": Band.SEVERE, "turn_band": Band.MINOR},
        "e3": {"hallucination": Band.NONE},
        "e4": {"hallucination": Band.NONE},
    }
    result = agreement(verdicts, labels)
    assert (result.labelled, result.matched, result.missing, result.judge_failed) == (4, 2, 1, 1)
    rows = {r.metric: r for r in result.metrics}
    assert set(rows) == {"hallucination", "turn_band"}
    assert rows["hallucination"].accuracy == 1.0 and rows["hallucination"].kappa == 1.0
    # e2's severe hallucination makes its turn band severe; the human said minor.
    assert rows["turn_band"].accuracy == 0.5
    assert result.unknown_keys == ("tone",)
    doc = json.loads(json.dumps(result.to_dict()))
    assert doc["bands"] == list(BANDS)


def test_judges_with_monotone_scores_agree_perfectly() -> None:
    a, b = [], []
    for i in range(6):
        s = 0.1 + 0.15 * i
        scores = dict.fromkeys(METRICS, s)
        a.append(_verdict(f"e{i}", scores, conversation=f"c{i}"))
        # The second judge is harsher but ranks every turn the same way.
        b.append(_verdict(f"e{i}", {m: s * s for m in METRICS}, conversation=f"c{i}"))
    a.append(_verdict("only-a", dict.fromkeys(METRICS, 0.5)))
    b.append(_verdict("e-failed", None))
    result = judge_agreement(a, b)
    assert result.shared == 6 and result.only_a == 1 and result.only_b == 1
    assert result.s_final.spearman == pytest.approx(1.0)
    assert result.s_final.kendall == pytest.approx(1.0)
    assert result.s_final_conversations.spearman == pytest.approx(1.0)
    assert all(c.spearman == pytest.approx(1.0) for _, c in result.metrics)
    doc = json.loads(json.dumps(result.to_dict()))
    assert set(doc["metrics"]) == set(METRICS)


def test_judges_with_constant_scores_give_a_note() -> None:
    a = [_verdict(f"e{i}", dict.fromkeys(METRICS, 0.5)) for i in range(4)]
    result = judge_agreement(a, a)
    assert result.s_final.spearman is None
    assert "constant" in result.s_final.notes[0]
