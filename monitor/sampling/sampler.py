"""Which turns get judged: deterministic per-conversation sampling, always-judge rules, budgets.

- Sampling hashes ``conversation_id`` (sha256, stable across processes and replicas, unlike
  ``hash()``) to a point in [0, 1) and judges the turn when it falls below the assistant's
  rate, so a conversation is judged whole or not at all.
- Always-judge rules (error codes in the answer, negative feedback, ...) override the rate.
- The hourly budget (``monitor.sampling.budget``, shared with the scheduled jobs): a sampled turn
  reserves ``calls_per_turn`` judge requests up front, a ``Reservation`` its decision carries
  and the turn's envelope after it; the judge step settles the actual requests and dollars,
  and every step that drops the turn instead (already judged, a revoke, a rewind, the stop)
  releases it. The budget applies to rule-matched turns too: a cost cap that an incident can
  blow through is not a cap.

With ``strategy: cascade`` (``monitor.sampling.cascade``) a turn that no rule picks is drawn
with the probability of its cheap-look cell against the same conversation point (reason
``cascade``); the decision carries the probability and the cell, which the turn stores.

Decision reasons are bounded label values (rule names are validated by the settings).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from monitor.config.sampling import AlwaysJudgeRule, SamplingConfig
from monitor.errors import ConfigError
from monitor.runtime.clock import Clock
from monitor.sampling.budget import OVER_REQUESTS, HourlyBudget, Reservation
from monitor.sampling.cascade import CELLS, CascadePolicy, DrawLedger
from monitor.schema.turn import TurnEvent
from monitor.stats.inclusion import draws

SKIP_REASONS: tuple[str, ...] = ("not_sampled", "budget_calls", "budget_usd")
RATE_REASON = "rate"
CASCADE_REASON = "cascade"
RULE_PREFIX = "rule:"

_FIELDS = ("query", "answer", "feedback")


@dataclass(frozen=True)
class SampleDecision:
    sampled: bool
    reason: str
    # What a sampled turn reserved of the hourly budget, to settle once (None: no budget).
    reservation: Reservation | None = field(default=None, compare=False, repr=False)
    # The cascade: the probability the turn was drawn with and its cheap-look cell (None:
    # drawn by the uniform rate; a rule's turn has probability 1).
    inclusion: float | None = field(default=None, compare=False)
    cell: str | None = field(default=None, compare=False)


# Decisions are immutable: the per-turn refusals are shared rather than built each time.
NOT_SAMPLED = SampleDecision(False, "not_sampled")
_OVER_CALLS = SampleDecision(False, "budget_calls")
_OVER_USD = SampleDecision(False, "budget_usd")


def sample_point(conversation_id: str) -> float:
    """The conversation's fixed point in [0, 1): the first 8 bytes of its sha256."""
    digest = hashlib.sha256(conversation_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


class _Rule:
    def __init__(self, rule: AlwaysJudgeRule) -> None:
        self.reason = f"{RULE_PREFIX}{rule.name}"
        self._equals = rule.equals
        self._label: str | None = None
        if rule.field.startswith("labels."):
            self._label = rule.field.removeprefix("labels.")
            if not self._label:
                raise ConfigError(f"sampling rule {rule.name!r}: field 'labels.' needs a key")
        elif rule.field not in _FIELDS:
            raise ConfigError(
                f"sampling rule {rule.name!r}: unknown field {rule.field!r}; "
                "use 'query', 'answer', 'feedback' or 'labels.<key>'"
            )
        self._field = rule.field
        if rule.pattern is None and rule.equals is None:
            raise ConfigError(f"sampling rule {rule.name!r}: set 'pattern' or 'equals'")
        try:
            self._pattern = re.compile(rule.pattern) if rule.pattern is not None else None
        except re.error as exc:
            raise ConfigError(f"sampling rule {rule.name!r}: bad pattern: {exc}") from exc

    def _value(self, turn: TurnEvent) -> str | None:
        if self._label is not None:
            return turn.labels.get(self._label)
        if self._field == "feedback":
            return turn.feedback.rating if turn.feedback is not None else None
        value: str = getattr(turn, self._field)
        return value

    def matches(self, turn: TurnEvent) -> bool:
        value = self._value(turn)
        if value is None:
            return False
        if self._equals is not None and value != self._equals:
            return False
        return self._pattern is None or self._pattern.search(value) is not None


class Sampler:
    """Thread-safe: the budget is settled from judge workers and scheduled jobs."""

    def __init__(self, config: SamplingConfig, clock: Clock, *, calls_per_turn: int = 1) -> None:
        if calls_per_turn < 1:
            raise ValueError("calls_per_turn must be >= 1")
        self._config = config
        self._rules = [_Rule(rule) for rule in config.always_judge]
        self.calls_per_turn = calls_per_turn
        self.budget = HourlyBudget(
            config.budget_calls_per_hour,
            config.budget_usd_per_hour,
            config.estimated_usd_per_call,
            clock,
        )
        self.cascade: CascadePolicy | None = None
        self.draws: DrawLedger | None = None
        if config.strategy == "cascade":
            self.cascade = CascadePolicy(
                CELLS,
                config.cascade_target() / calls_per_turn,
                clock,
                floor=config.cascade_floor,
                look_share=config.cascade_look_share,
            )
            self.draws = DrawLedger(self.cascade)

    def rate_for(self, assistant: str) -> float:
        return self._config.rates.get(assistant, self._config.default_rate)

    def reason_for(self, turn: TurnEvent, *, rule: str | None = None) -> str | None:
        """Why ``turn`` would be judged if the budget allows (None: it is not sampled,
        whatever the budget). Pure: no budget is charged, so screening processes can ask it
        (``monitor.stream.steps.screen``)."""
        for configured in self._rules:
            if configured.matches(turn):
                return configured.reason
        if rule is not None:
            return rule
        config = self._config  # ``rate_for``, without a call per turn
        if config.strategy == "cascade":
            # Any turn may be drawn: only the cheap look and the live probabilities decide.
            return CASCADE_REASON
        rate = config.rates.get(turn.assistant.name, config.default_rate)
        # The point is in [0, 1): at rate 0 or 1 the hash cannot change the outcome.
        if rate <= 0.0 or (rate < 1.0 and sample_point(turn.conversation_id) >= rate):
            return None
        return RATE_REASON

    def decide(self, turn: TurnEvent, *, rule: str | None = None) -> SampleDecision:
        """``rule``: a rule the caller found matching (e.g. ``rule:identifier_tripwire``);
        the configured rules come first, and the budget applies to it like to any rule."""
        reason = self.reason_for(turn, rule=rule)
        if reason is None:
            return NOT_SAMPLED
        reserved = self.budget.reservation(self.calls_per_turn)
        if isinstance(reserved, str):
            return _OVER_CALLS if reserved == OVER_REQUESTS else _OVER_USD
        return SampleDecision(True, reason, reserved)

    def looks_at(self, turn: TurnEvent, *, rule: str | None = None) -> bool:
        """Whether the cascade needs the cheap look at ``turn``: a rule's turn, or a turn whose
        conversation is within ``cascade_look_share`` (the others cannot be drawn)."""
        cascade = self.cascade
        if cascade is None:
            return False
        if cascade.look_share >= 1.0 or self.reason_for(turn, rule=rule) != CASCADE_REASON:
            return True
        return sample_point(turn.conversation_id) < cascade.look_share

    def decide_cascade(
        self, turn: TurnEvent, cell: str, *, rule: str | None = None
    ) -> SampleDecision:
        """The cascade's decision for a turn the cheap look put in ``cell``: a rule's turn is
        drawn with probability 1, any other with its cell's probability against the
        conversation's point. Every turn counts as the cell's traffic, drawn or not."""
        cascade = self.cascade
        if cascade is None:
            raise ValueError("decide_cascade needs sampling.strategy: cascade")
        probability = cascade.probability(cell)
        reason = self.reason_for(turn, rule=rule)
        if reason != CASCADE_REASON:
            probability = 1.0  # an always-judge rule (a tripwire hit included)
        elif not draws(sample_point(turn.conversation_id), probability):
            return SampleDecision(False, "not_sampled", None, probability, cell)
        reserved = self.budget.reservation(self.calls_per_turn)
        if isinstance(reserved, str):
            return _OVER_CALLS if reserved == OVER_REQUESTS else _OVER_USD
        if self.draws is not None:
            self.draws.drawn(turn.event_id, probability, cell)
        return SampleDecision(True, str(reason), reserved, probability, cell)
