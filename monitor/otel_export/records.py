"""A verdict → its ``gen_ai.evaluation.result`` records (pure; no I/O).

Following the GenAI semantic conventions' evaluation event: one record per metric and one for
the turn, each with ``gen_ai.evaluation.name``, ``gen_ai.evaluation.score.value``,
``gen_ai.evaluation.score.label`` (the severity band) and ``gen_ai.evaluation.explanation``
(the judge's justification, redacted), parented to the evaluated span by its trace id and span
id. They are log records, not span events: the Span Events API is being deprecated in favour
of events as log records carrying the span's context.

A verdict whose judges failed becomes one record for the turn, labelled ``judge_failed`` with
``error.type`` set to the reason and no score: the conventions make the score conditionally
required, and a failure scored 0 would read as a terrible answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from monitor.schema.turn import METRICS, TurnEvent, Verdict

EVENT_NAME = "gen_ai.evaluation.result"
# gen_ai.evaluation.name of the record that carries the turn's S_final and band.
TURN_EVALUATION = "case_aware_score"
MAX_EXPLANATION_CHARS = 600

AttributeValue = str | float | int | bool


@dataclass(frozen=True)
class EvaluationRecord:
    trace_id: int  # 128-bit, as the SDK's span context wants it
    span_id: int  # 64-bit
    timestamp_ns: int
    attributes: dict[str, AttributeValue]


def evaluation_records(
    turn: TurnEvent,
    verdict: Verdict,
    timestamp_ns: int,
    redact: Callable[[str], str] = lambda text: text,
) -> list[EvaluationRecord]:
    """The records for one judged turn; none when the turn names no span to attach them to."""
    if turn.trace_id is None or turn.span_id is None:
        return []
    trace_id, span_id = int(turn.trace_id, 16), int(turn.span_id, 16)

    def record(attributes: dict[str, AttributeValue]) -> EvaluationRecord:
        return EvaluationRecord(trace_id, span_id, timestamp_ns, attributes)

    if verdict.status != "ok" or verdict.s_final is None or verdict.turn_band is None:
        attributes: dict[str, AttributeValue] = {
            "gen_ai.evaluation.name": TURN_EVALUATION,
            "gen_ai.evaluation.score.label": "judge_failed",
            "error.type": verdict.failure_reason or "judge_failed",
        }
        return [record(attributes)]
    justifications = _justifications(verdict)
    out = []
    for metric in METRICS:
        score = verdict.metric_scores.get(metric)
        band = verdict.metric_bands.get(metric)
        if score is None or band is None:
            continue
        attributes = {
            "gen_ai.evaluation.name": metric,
            "gen_ai.evaluation.score.value": float(score),
            "gen_ai.evaluation.score.label": band.value,
        }
        explanation = justifications.get(metric)
        if explanation:
            attributes["gen_ai.evaluation.explanation"] = redact(explanation)[
                :MAX_EXPLANATION_CHARS
            ]
        out.append(record(attributes))
    out.append(
        record(
            {
                "gen_ai.evaluation.name": TURN_EVALUATION,
                "gen_ai.evaluation.score.value": float(verdict.s_final),
                "gen_ai.evaluation.score.label": verdict.turn_band.value,
            }
        )
    )
    return out


def _justifications(verdict: Verdict) -> dict[str, str]:
    """Per metric, the justification of the first judge that scored the turn (the arbiter's
    when there was one: its score broke the tie)."""
    ok = [j for j in verdict.judgments if j.ok]
    ok.sort(key=lambda j: j.role != "arbiter")
    out: dict[str, str] = {}
    for judgment in ok:
        scores = judgment.scores
        if scores is None:
            continue
        for metric in METRICS:
            out.setdefault(metric, scores.get(metric).justification)
    return out
