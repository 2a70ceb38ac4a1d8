"""The strict output contract of a case-aware judge: the JSON schema sent to the endpoint and
the parser that validates what comes back (pure; no I/O).

The schema is written out explicitly rather than generated from ``JudgeScores`` because
OpenAI's strict structured-output mode accepts only a subset of JSON Schema: no ``$ref``,
``additionalProperties: false`` and ``required`` on every object, and no string-length
keywords. The 600-character bound on justifications is therefore stated in the description
and in the prompt, and enforced by ``JudgeScores`` on our side.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from monitor.errors import JudgeOutputInvalid, validation_error_lines
from monitor.schema.turn import MAX_JUSTIFICATION_CHARS, METRICS, JudgeScores

SCHEMA_NAME = "case_aware_judgment"

# Errors fed back to the judge (and kept as failure detail) are capped: a reply that is
# wrong everywhere should not turn the retry prompt into an essay.
_MAX_REPORTED_ERRORS = 12
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*[ \t]*\n(?P<body>.*)\n```$", re.DOTALL)


def judge_output_json_schema() -> dict[str, Any]:
    """The JSON schema of a judge reply: all eight metrics, each {score, justification}."""
    metric = {
        "type": "object",
        "properties": {
            "score": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "description": "0 = complete failure, 1 = full compliance; inside the band "
                "of the most severe issue found.",
            },
            "justification": {
                "type": "string",
                "description": f"At most {MAX_JUSTIFICATION_CHARS} characters: the most "
                "severe issue found and why it sets the score.",
            },
        },
        "required": ["score", "justification"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {m: dict(metric) for m in METRICS},
        "required": list(METRICS),
        "additionalProperties": False,
    }


def strip_code_fence(text: str) -> str:
    """Remove one Markdown code fence around the whole reply (models without a JSON mode
    often add one); anything else around the JSON is left for validation to reject."""
    stripped = text.strip()
    match = _FENCE.match(stripped)
    return match.group("body").strip() if match else stripped


def describe_validation_error(exc: ValidationError) -> str:
    """A short list of what was wrong, by location, without echoing the offending values."""
    return "; ".join(validation_error_lines(exc, _MAX_REPORTED_ERRORS))


def parse_judge_output(text: str | None) -> JudgeScores:
    """Validate a raw reply strictly. Raises JudgeOutputInvalid with a short description."""
    if text is None or not text.strip():
        raise JudgeOutputInvalid("empty reply: expected one JSON object")
    try:
        return JudgeScores.model_validate_json(strip_code_fence(text))
    except ValidationError as exc:
        raise JudgeOutputInvalid(describe_validation_error(exc)) from exc
