import json
from typing import Any

import pytest

from monitor.errors import JudgeOutputInvalid
from monitor.judging.prompt import judge_output_json_schema as reexported
from monitor.judging.schema import judge_output_json_schema, parse_judge_output
from monitor.schema.turn import METRICS


def valid_doc(score: float = 0.8) -> dict[str, Any]:
    return {m: {"score": score, "justification": f"{m} ok"} for m in METRICS}


def objects(node: Any) -> list[dict[str, Any]]:
    """Every JSON-schema object node, depth first."""
    found = []
    if isinstance(node, dict):
        if node.get("type") == "object":
            found.append(node)
        for value in node.values():
            found.extend(objects(value))
    return found


def test_schema_is_strict_mode_compatible() -> None:
    schema = judge_output_json_schema()
    assert reexported() == schema
    assert "$ref" not in json.dumps(schema) and "$defs" not in json.dumps(schema)
    nodes = objects(schema)
    assert len(nodes) == 1 + len(METRICS)
    for node in nodes:
        assert node["additionalProperties"] is False
        assert sorted(node["required"]) == sorted(node["properties"])
    assert schema["required"] == list(METRICS)
    score = schema["properties"]["hallucination"]["properties"]["score"]
    assert (score["type"], score["minimum"], score["maximum"]) == ("number", 0, 1)


def test_valid_output_parses() -> None:
    scores = parse_judge_output(json.dumps(valid_doc(0.42)))
    assert scores.score_map() == dict.fromkeys(METRICS, 0.42)


def test_one_code_fence_around_the_reply_is_tolerated() -> None:
    fenced = "```json\n" + json.dumps(valid_doc()) + "\n```"
    assert parse_judge_output(fenced).hallucination.score == 0.8


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, "empty reply"),
        ("   ", "empty reply"),
        ('{"hallucination": ', "Invalid JSON"),
        ("Here you go: " + json.dumps(valid_doc()), "Invalid JSON"),
        (json.dumps({**valid_doc(), "overall": 0.9}), "overall: Extra inputs"),
        (json.dumps({k: v for k, v in valid_doc().items() if k != "answer_type_fit"}), "answer"),
        (
            json.dumps({**valid_doc(), "hallucination": {"score": 1.2, "justification": "x"}}),
            "hallucination.score: Input should be less than or equal to 1",
        ),
        (
            json.dumps({**valid_doc(), "hallucination": {"score": 0.5, "justification": ""}}),
            "hallucination.justification",
        ),
        (
            json.dumps(
                {**valid_doc(), "hallucination": {"score": 0.5, "justification": "x" * 601}}
            ),
            "at most 600 characters",
        ),
    ],
)
def test_invalid_output_is_rejected_with_a_short_reason(text: str | None, expected: str) -> None:
    with pytest.raises(JudgeOutputInvalid) as info:
        parse_judge_output(text)
    assert expected in str(info.value)
    assert "x" * 50 not in str(info.value)  # offending values are not echoed back
