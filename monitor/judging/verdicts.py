"""Turning judgments into a Verdict (pure; no I/O)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from monitor.schema.turn import Judgment, TurnEvent, Verdict
from monitor.scoring import turn as scoring


def scored_verdict(
    turn: TurnEvent,
    final_scores: Mapping[str, float],
    judgments: Sequence[Judgment],
    *,
    weights: Mapping[str, float],
    weight_profile: str,
    critical: Sequence[str],
    judge_config_hash: str = "",
    arbitrated: bool = False,
    arbitration_trigger: str | None = None,
) -> Verdict:
    s = scoring.s_final(final_scores, weights)
    return Verdict(
        event_id=turn.event_id,
        conversation_id=turn.conversation_id,
        turn_index=turn.turn_index,
        assistant=turn.assistant,
        status="ok",
        weight_profile=weight_profile,
        s_final=s,
        final_band=scoring.band(s),
        turn_band=scoring.turn_band(final_scores, weights, critical),
        metric_scores=dict(final_scores),
        metric_bands=scoring.metric_bands(final_scores),
        judgments=list(judgments),
        arbitrated=arbitrated,
        arbitration_trigger=arbitration_trigger,
        judge_config_hash=judge_config_hash,
    )


def failed_verdict(
    turn: TurnEvent,
    judgments: Sequence[Judgment],
    reason: str,
    *,
    weight_profile: str,
    judge_config_hash: str = "",
    arbitrated: bool = False,
    arbitration_trigger: str | None = None,
) -> Verdict:
    """A turn no judge could score: recorded, counted, never scored."""
    return Verdict(
        event_id=turn.event_id,
        conversation_id=turn.conversation_id,
        turn_index=turn.turn_index,
        assistant=turn.assistant,
        status="judge_failed",
        failure_reason=reason,
        weight_profile=weight_profile,
        judgments=list(judgments),
        arbitrated=arbitrated,
        arbitration_trigger=arbitration_trigger,
        judge_config_hash=judge_config_hash,
    )


def single_judge_verdict(
    turn: TurnEvent,
    judgment: Judgment,
    *,
    weights: Mapping[str, float],
    weight_profile: str,
    critical: Sequence[str],
    judge_config_hash: str = "",
) -> Verdict:
    if judgment.ok and judgment.scores is not None:
        return scored_verdict(
            turn,
            judgment.scores.score_map(),
            [judgment],
            weights=weights,
            weight_profile=weight_profile,
            critical=critical,
            judge_config_hash=judge_config_hash,
        )
    return failed_verdict(
        turn,
        [judgment],
        judgment.failure_reason or "internal",
        weight_profile=weight_profile,
        judge_config_hash=judge_config_hash,
    )
