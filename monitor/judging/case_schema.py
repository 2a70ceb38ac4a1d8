"""The strict output contract of a case judge: the JSON schema sent to the endpoint and the
parser that validates what comes back (pure; no I/O).

Written out for the subset of JSON Schema OpenAI's strict mode accepts (no ``$ref``,
``additionalProperties: false`` and ``required`` on every object, no string lengths), like
``monitor.judging.schema`` for turns; ``CaseScores`` enforces the justification length.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from monitor.errors import JudgeOutputInvalid
from monitor.judging.schema import (
    describe_validation_error,
    judge_output_json_schema,
    strip_code_fence,
)
from monitor.schema.case import CASE_METRICS, RESOLUTION_OUTCOMES, CaseScores

CASE_SCHEMA_NAME = "case_judgment"


def case_output_json_schema() -> dict[str, Any]:
    """The JSON schema of a case judge's reply: the outcome and the five metrics."""
    metric = judge_output_json_schema()["properties"]["hallucination"]
    properties: dict[str, Any] = {
        "resolution_outcome": {
            "type": "string",
            "enum": list(RESOLUTION_OUTCOMES),
            "description": "How the case ended: resolved, partial, unresolved or handed_off "
            "(a person took it over).",
        }
    }
    properties.update({m: dict(metric) for m in CASE_METRICS})
    return {
        "type": "object",
        "properties": properties,
        "required": ["resolution_outcome", *CASE_METRICS],
        "additionalProperties": False,
    }


def parse_case_output(text: str | None) -> CaseScores:
    """Validate a raw reply strictly. Raises JudgeOutputInvalid with a short description."""
    if text is None or not text.strip():
        raise JudgeOutputInvalid("empty reply: expected one JSON object")
    try:
        return CaseScores.model_validate_json(strip_code_fence(text))
    except ValidationError as exc:
        raise JudgeOutputInvalid(describe_validation_error(exc)) from exc
