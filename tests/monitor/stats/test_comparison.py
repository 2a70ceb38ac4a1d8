import json

import pytest

from monitor.schema.turn import METRICS, Assistant, Verdict
from monitor.scoring import turn as scoring
from monitor.stats.comparison import compare


def _verdict(
    name: str, conversation: str, turn: int, score: float | None, config: str = "h1"
) -> Verdict:
    base = {
        "event_id": f"{name}-{conversation}-{turn}",
        "conversation_id": conversation,
        "turn_index": turn,
        "assistant": Assistant(name="bot", version=name, model="m"),
        "weight_profile": "default",
        "judge_config_hash": config,
    }
    if score is None:
        return Verdict(**base, status="judge_failed", failure_reason="invalid_output")
    scores = dict.fromkeys(METRICS, score)
    return Verdict(
        **base,
        status="ok",
        s_final=score,
        metric_scores=scores,
        metric_bands=scoring.metric_bands(scores),
    )


def _side(name: str, per_conv: dict[str, list[float | None]], config: str = "h1") -> list[Verdict]:
    return [
        _verdict(name, conv, i, s, config)
        for conv, scores in per_conv.items()
        for i, s in enumerate(scores)
    ]


def test_constant_shift_at_conversation_level() -> None:
    a = {f"c{i}": [0.3 + 0.05 * i, 0.4 + 0.05 * i] for i in range(8)}
    b = {c: [s + 0.1 for s in scores if s is not None] for c, scores in a.items()}
    result = compare(_side("stable", a), _side("canary", b))
    assert result.n_pairs == 8
    assert result.s_final.mean_delta == pytest.approx(0.1)  # B − A
    assert result.s_final.ci_low == pytest.approx(0.1)
    assert result.s_final.ci_high == pytest.approx(0.1)
    assert result.s_final.wilcoxon_p == pytest.approx(2 / 2**8)
    assert result.assistants_a == ("bot@stable",) and result.assistants_b == ("bot@canary",)
    assert [m.metric for m in result.metrics] == list(METRICS)
    assert all(m.test.mean_delta == pytest.approx(0.1) for m in result.metrics)


def test_unit_is_the_conversation_not_the_turn() -> None:
    # c1 has three turns in A; its conversation mean (0.5) is what gets paired.
    a = _side("a", {"c1": [0.2, 0.5, 0.8], "c2": [0.4], "c3": [0.6]})
    b = _side("b", {"c1": [0.6], "c2": [0.5], "c3": [0.9]})
    result = compare(a, b)
    assert result.n_pairs == 3
    assert result.s_final.mean_a == pytest.approx((0.5 + 0.4 + 0.6) / 3)
    assert result.s_final.mean_delta == pytest.approx((0.1 + 0.1 + 0.3) / 3)


def test_only_shared_conversations_and_failures_are_excluded_and_counted() -> None:
    a = _side("a", {"c1": [0.5, None], "c2": [0.6], "c3": [None], "only_a": [0.9]})
    b = _side("b", {"c1": [0.7], "c2": [0.7], "c3": [0.8], "only_b": [0.1]})
    result = compare(a, b)
    assert result.n_pairs == 2  # c3 has no scored turn in A
    assert (result.only_a, result.only_b) == (1, 2)
    assert (result.judge_failed_a, result.judge_failed_b) == (2, 0)
    assert (result.turns_scored_a, result.turns_scored_b) == (3, 4)


def test_identical_inputs_are_handled() -> None:
    a = _side("a", {f"c{i}": [0.1 * i] for i in range(5)})
    result = compare(a, a)
    assert result.s_final.mean_delta == 0.0
    assert result.s_final.wilcoxon_p is None
    assert "all differences are zero" in result.s_final.notes[0]


def test_nothing_in_common() -> None:
    result = compare(_side("a", {"c1": [0.5]}), _side("b", {"c2": [0.5]}))
    assert result.n_pairs == 0
    assert any("nothing to compare" in n for n in result.notes)


def test_different_judge_configurations_are_flagged() -> None:
    a = _side("a", {"c1": [0.5], "c2": [0.6]}, config="h1")
    b = _side("b", {"c1": [0.5], "c2": [0.7]}, config="h2")
    assert any("different judge configurations" in n for n in compare(a, b).notes)


def test_reweighting_uses_the_metric_scores() -> None:
    a = _side("a", {"c1": [0.5], "c2": [0.5]})
    b = [
        v.model_copy(update={"metric_scores": {**v.metric_scores, "hallucination": 1.0}})
        for v in _side("b", {"c1": [0.5], "c2": [0.5]})
    ]
    as_judged = compare(a, b)
    only_hallucination = {**dict.fromkeys(METRICS, 0.0), "hallucination": 1.0}
    reweighted = compare(a, b, only_hallucination, weight_profile="custom")
    assert as_judged.s_final.mean_delta == 0.0
    assert reweighted.s_final.mean_delta == pytest.approx(0.5)
    assert reweighted.weight_profile == "custom"


def test_to_dict_is_json() -> None:
    a = _side("a", {f"c{i}": [0.1 * i] for i in range(1, 6)})
    b = _side("b", {f"c{i}": [0.1 * i + 0.01 * i] for i in range(1, 6)})
    doc = json.loads(json.dumps(compare(a, b).to_dict()))
    assert doc["n_pairs"] == 5
    assert doc["delta"] == "B - A"
    assert set(doc["metrics"]) == set(METRICS)
    assert doc["s_final"]["ci_method"].startswith("bootstrap")
