"""Cases: a support conversation judged as a whole, its five metrics and its verdict.

A case is every stored turn of one assistant in one ``conversation_id`` (two assistants
answering the same conversation id, as an A/B pair does, are two cases), read from the store
when the conversation has gone quiet (``cases.idle_seconds``) or a turn said it ended
(``TurnEvent.ends_case``). The case judge scores it on five metrics that only show across
turns, each a score in [0, 1] with a justification (the Case-Aware paper's contract, the same
bands), and names the outcome of the case (``resolution_outcome``). The models are the source
of truth of the judges' output contract (``monitor.judging.case_schema``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from monitor.schema.turn import Band, JudgeRole, JudgeStatus, MetricScore, TurnEvent

# The case metrics, in the order prompts, schemas and dashboards list them.
CASE_METRICS: tuple[str, ...] = (
    "resolution",
    "issue_tracking",
    "workflow_alignment",
    "consistency",
    "customer_effort",
)

# How the case ended, as the judge reads the conversation (a bounded metric label).
ResolutionOutcome = Literal["resolved", "partial", "unresolved", "handed_off"]
RESOLUTION_OUTCOMES: tuple[str, ...] = ("resolved", "partial", "unresolved", "handed_off")

# Why a case was closed: quiet for idle_seconds, or a turn said it ended (a bounded label).
CloseReason = Literal["idle", "ended"]
CLOSE_REASONS: tuple[str, ...] = ("idle", "ended")


class CaseScores(BaseModel):
    """What a case judge must return: the five metrics and the outcome, nothing else."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    resolution_outcome: ResolutionOutcome
    resolution: MetricScore
    issue_tracking: MetricScore
    workflow_alignment: MetricScore
    consistency: MetricScore
    customer_effort: MetricScore

    def score_map(self) -> dict[str, float]:
        return {m: self.get(m).score for m in CASE_METRICS}

    def get(self, metric: str) -> MetricScore:
        if metric not in CASE_METRICS:
            raise KeyError(metric)
        result: MetricScore = getattr(self, metric)
        return result


class CaseJudgment(BaseModel):
    """One case judge's answer for one case, with everything an auditor needs."""

    model_config = ConfigDict(frozen=True)

    judge: str
    kind: str  # heuristic | openai
    model: str
    role: JudgeRole = "single"
    status: JudgeStatus
    failure_reason: str | None = None
    failure_detail: str | None = None
    scores: CaseScores | None = None
    raw_output: str | None = None
    prompt_version: str = ""
    prompt_hash: str = ""
    attempts: int = Field(default=1, ge=0)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.scores is not None


@dataclass(frozen=True)
class CaseTurn:
    """One stored turn of a case, with the stored time the case job orders and fences on."""

    event: TurnEvent
    stored_at: datetime


@dataclass(frozen=True)
class Case:
    """One assistant's turns of one conversation as the judge will see them, oldest first.

    ``turns_cut``: the oldest turns left out to fit the judge's context (the prompt and the
    verdict say how many)."""

    assistant: str
    conversation_id: str
    turns: tuple[CaseTurn, ...]
    turns_cut: int = 0

    @property
    def events(self) -> list[TurnEvent]:
        return [t.event for t in self.turns]

    @property
    def last(self) -> TurnEvent:
        return self.turns[-1].event


@dataclass(frozen=True)
class CaseVerdict:
    """The scoring of one case version: the weighted case score, bands, outcome, judgments."""

    conversation_id: str
    version: int
    assistant: str
    status: JudgeStatus
    close_reason: CloseReason
    turns: int  # stored turns the case covered
    turns_cut: int  # of which the oldest cut to fit the judge's context
    covered_until: datetime  # the newest stored_at among them
    judge_config_hash: str
    failure_reason: str | None = None
    failures_in_row: int = 0  # judge_failed versions in a row, this one included
    case_score: float | None = None
    case_band: Band | None = None
    resolution_outcome: str | None = None
    metric_scores: dict[str, float] = field(default_factory=dict)
    metric_bands: dict[str, Band] = field(default_factory=dict)
    turn_mean_s_final: float | None = None  # the paper's conversation-level aggregate
    judgments: tuple[CaseJudgment, ...] = ()
    arbitrated: bool = False
    arbitration_trigger: str | None = None
