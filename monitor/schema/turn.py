"""Data models: the turn event (schema v1), judge scores, judgments and verdicts.

The pydantic models are the source of truth; ``casewatch schema`` prints
``TurnEvent.model_json_schema()`` so producers can validate before they publish.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

# The eight case-aware metrics of the Case-Aware paper, in the paper's order.
METRICS: tuple[str, ...] = (
    "hallucination",
    "retrieval_correctness",
    "context_sufficiency",
    "answer_helpfulness",
    "answer_type_fit",
    "identifier_integrity",
    "case_issue_identification",
    "resolution_alignment",
)

MetricName = Literal[
    "hallucination",
    "retrieval_correctness",
    "context_sufficiency",
    "answer_helpfulness",
    "answer_type_fit",
    "identifier_integrity",
    "case_issue_identification",
    "resolution_alignment",
]

# Justifications are for humans triaging a regression: a few sentences, never an essay.
MAX_JUSTIFICATION_CHARS = 600

Id = Annotated[str, StringConstraints(min_length=1, max_length=256, strip_whitespace=True)]


# single: the only judge; primary: one of a panel's judges; arbiter: called on disagreement.
JudgeRole = Literal["single", "primary", "arbiter"]


class Band(enum.StrEnum):
    """Severity bands of the Case-Aware paper's appendix B, worst first."""

    SEVERE = "severe"
    MODERATE = "moderate"
    MINOR = "minor"
    NONE = "none"

    @property
    def rank(self) -> int:
        """0 for severe (worst) .. 3 for none (best)."""
        return _BAND_ORDER.index(self)


_BAND_ORDER = (Band.SEVERE, Band.MODERATE, Band.MINOR, Band.NONE)


# ---------------------------------------------------------------- the turn event (schema v1)


class _Open(BaseModel):
    # Unknown fields are kept (so nothing a producer sent is lost) but never used in prompts.
    model_config = ConfigDict(extra="allow", frozen=True)


class Assistant(_Open):
    name: Id
    version: Annotated[str, StringConstraints(max_length=128)]
    model: Annotated[str, StringConstraints(max_length=256)]


class Case(_Open):
    subject: str
    description: str
    product: str | None = None
    environment: str | None = None


class Message(_Open):
    role: Literal["user", "assistant", "system", "agent", "tool"]
    content: str


class Context(_Open):
    id: Id
    text: str
    score: float | None = None
    source: str | None = None


class Feedback(_Open):
    """End-user feedback on the turn, when the assistant's UI collects it."""

    rating: Literal["positive", "negative", "neutral"]
    comment: str | None = None


class TurnEvent(_Open):
    """One assistant turn of a support conversation, as published on the Kafka topic."""

    event_id: Id = Field(
        description="Idempotency key: replaying the same event never double-counts."
    )
    conversation_id: Id
    turn_index: int = Field(ge=0)
    timestamp: datetime
    assistant: Assistant
    case: Case
    history: list[Message] = Field(default_factory=list)
    query: str
    contexts: list[Context] = Field(default_factory=list)
    answer: str
    reference: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    feedback: Feedback | None = None
    ends_case: bool = Field(
        default=False,
        description="True on the conversation's last turn when the producer knows the case "
        "ended (the customer closed the chat, an agent took it over): its case is judged at "
        "the next run of the case job instead of after cases.idle_seconds of quiet. A later "
        "turn of the same conversation resumes the case (judged again as a new version).",
    )
    # The span that produced the answer, when the turn was read from OpenTelemetry traces (or a
    # producer knows it): kept with the stored turn and on the evaluation records written back.
    trace_id: str | None = Field(default=None, pattern=r"^[0-9a-f]{32}$")
    span_id: str | None = Field(default=None, pattern=r"^[0-9a-f]{16}$")


# ---------------------------------------------------------------- judge output


class MetricScore(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    score: float = Field(ge=0.0, le=1.0)
    justification: str = Field(min_length=1, max_length=MAX_JUSTIFICATION_CHARS)


class JudgeScores(BaseModel):
    """What a judge must return: all eight metrics, nothing else (strict)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hallucination: MetricScore
    retrieval_correctness: MetricScore
    context_sufficiency: MetricScore
    answer_helpfulness: MetricScore
    answer_type_fit: MetricScore
    identifier_integrity: MetricScore
    case_issue_identification: MetricScore
    resolution_alignment: MetricScore

    def score_map(self) -> dict[str, float]:
        return {m: getattr(self, m).score for m in METRICS}

    def get(self, metric: str) -> MetricScore:
        if metric not in METRICS:
            raise KeyError(metric)
        result: MetricScore = getattr(self, metric)
        return result


JudgeStatus = Literal["ok", "judge_failed"]


class Judgment(BaseModel):
    """One judge's answer for one turn, with everything an auditor needs."""

    model_config = ConfigDict(frozen=True)

    judge: str = Field(description="Configured judge name, e.g. 'heuristic' or 'primary'.")
    kind: str = Field(description="Implementation: 'heuristic' or 'openai'.")
    model: str
    role: JudgeRole = "single"
    status: JudgeStatus
    failure_reason: str | None = None
    failure_detail: str | None = None
    scores: JudgeScores | None = None
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


class Verdict(BaseModel):
    """The final scoring of one turn: weighted S_final, bands, and the judgments behind it."""

    model_config = ConfigDict(frozen=True)

    event_id: str
    conversation_id: str
    turn_index: int
    assistant: Assistant
    status: JudgeStatus
    failure_reason: str | None = None
    weight_profile: str
    s_final: float | None = None
    final_band: Band | None = None
    turn_band: Band | None = None
    metric_scores: dict[str, float] = Field(default_factory=dict)
    metric_bands: dict[str, Band] = Field(default_factory=dict)
    judgments: list[Judgment] = Field(default_factory=list)
    arbitrated: bool = False
    arbitration_trigger: str | None = None
    judge_config_hash: str = ""

    def compact(self, turn: TurnEvent) -> dict[str, Any]:
        """The compact row of the Case-Aware paper's A.2: case, response, contexts and the
        aggregate."""
        return {
            "event_id": self.event_id,
            "conversation_id": self.conversation_id,
            "turn_index": self.turn_index,
            "assistant": self.assistant.name,
            "assistant_version": self.assistant.version,
            "case_subject": turn.case.subject,
            "case_description": turn.case.description,
            "query": turn.query,
            "answer": turn.answer,
            "context_ids": [c.id for c in turn.contexts],
            "status": self.status,
            "failure_reason": self.failure_reason,
            "s_final": self.s_final,
            "turn_band": self.turn_band.value if self.turn_band else None,
            "metric_scores": self.metric_scores,
        }


# One record for a drift sample; the store reads them (storage/drift_queries.py),
# stats/drift.py aggregates them. A dataclass: a week of turns is several hundred thousand.
@dataclass(frozen=True)
class TurnSample:
    """What drift needs of one stored turn and its newest verdict (``status`` None: none)."""

    status: str | None
    s_final: float | None
    turn_band: str | None
    metric_bands: Mapping[str, str]
    product: str | None
    environment: str | None
    labels: Mapping[str, str | None]
    contexts_count: int
    retrieval_score: float | None
    answer_length: int
    # 1/π of a turn the cascade drew with probability π; 1 for a uniform draw or a rule's turn.
    weight: float = 1.0


# What says how sure the judge was of one stored turn; the store reads it
# (storage/labels.py), stats/active_sampling.py weighs it, so statistics import no store.
@dataclass(frozen=True)
class TurnSignals:
    """What says how sure the judge was of one turn (its newest ok verdict)."""

    s_final: float | None
    metric_scores: dict[str, float]
    arbitration_trigger: str | None
    judgments: list[tuple[str, dict[str, float]]]  # (judge kind, scores) of each judge answering
