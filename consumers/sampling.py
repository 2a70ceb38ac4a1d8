"""Which turns get judged: deterministic per-conversation sampling, always-judge rules, budgets.

- Sampling hashes ``conversation_id`` (sha256, stable across processes and replicas, unlike
  ``hash()``) to a point in [0, 1) and judges the turn when it falls below the assistant's
  rate, so a conversation is judged whole or not at all.
- Always-judge rules (error codes in the answer, negative feedback, ...) override the rate.
- Two token buckets cap spend per hour: judge calls and USD. Each starts full, holds at most one
  hour's budget and refills continuously on the injected clock. A sampled turn is charged up
  front (one turn's calls, ``estimated_usd_per_call`` dollars); ``record_cost`` corrects the USD
  bucket with the actual spend. The budget applies to rule-matched turns too: a cost cap that
  an incident can blow through is not a cap.

Decision reasons are bounded label values (rule names are validated by the settings).
"""

from __future__ import annotations

import hashlib
import re
import threading
from dataclasses import dataclass

from monitor.clock import Clock
from monitor.errors import ConfigError
from monitor.models import TurnEvent
from monitor.settings import AlwaysJudgeRule, SamplingConfig

SKIP_REASONS: tuple[str, ...] = ("not_sampled", "budget_calls", "budget_usd")
RATE_REASON = "rate"
RULE_PREFIX = "rule:"

_FIELDS = ("query", "answer", "feedback")
_HOUR_S = 3600.0


@dataclass(frozen=True)
class SampleDecision:
    sampled: bool
    reason: str


# Decisions are immutable: the per-turn refusals are shared rather than built each time.
NOT_SAMPLED = SampleDecision(False, "not_sampled")
_OVER_CALLS = SampleDecision(False, "budget_calls")
_OVER_USD = SampleDecision(False, "budget_usd")


def sample_point(conversation_id: str) -> float:
    """The conversation's fixed point in [0, 1): the first 8 bytes of its sha256."""
    digest = hashlib.sha256(conversation_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


class TokenBucket:
    """``per_hour`` tokens per hour, refilled continuously, at most ``per_hour`` held.

    The level may go negative when actual spend exceeds the up-front charge; it then has to
    refill past zero before anything else is admitted.
    """

    def __init__(self, per_hour: float, clock: Clock) -> None:
        self._capacity = per_hour
        self._rate = per_hour / _HOUR_S
        self._clock = clock
        self._level = per_hour
        self._at = clock.monotonic()

    @property
    def level(self) -> float:
        self._refill()
        return self._level

    def try_take(self, amount: float) -> bool:
        self._refill()
        if self._level <= 0 or self._level < amount:
            return False
        self._level -= amount
        return True

    def adjust(self, delta: float) -> None:
        """Give back (positive) or charge more (negative), never above capacity."""
        self._refill()
        self._level = min(self._capacity, self._level + delta)

    def _refill(self) -> None:
        now = self._clock.monotonic()
        elapsed = max(0.0, now - self._at)
        self._at = now
        self._level = min(self._capacity, self._level + elapsed * self._rate)


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
    """Thread-safe: ``record_cost`` may be called from judge workers."""

    def __init__(self, config: SamplingConfig, clock: Clock, *, calls_per_turn: int = 1) -> None:
        if calls_per_turn < 1:
            raise ValueError("calls_per_turn must be >= 1")
        self._config = config
        self._rules = [_Rule(rule) for rule in config.always_judge]
        self._calls_per_turn = calls_per_turn
        self._estimate = config.estimated_usd_per_call * calls_per_turn
        self._calls = (
            TokenBucket(config.budget_calls_per_hour, clock)
            if config.budget_calls_per_hour is not None
            else None
        )
        self._usd = (
            TokenBucket(config.budget_usd_per_hour, clock)
            if config.budget_usd_per_hour is not None
            else None
        )
        self._lock = threading.Lock()

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
        rate = self.rate_for(turn.assistant.name)
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
        with self._lock:
            if self._calls is not None and self._calls.level < self._calls_per_turn:
                return _OVER_CALLS
            if self._usd is not None and not self._usd.try_take(self._estimate):
                return _OVER_USD
            if self._calls is not None:
                self._calls.try_take(self._calls_per_turn)
        return SampleDecision(True, reason)

    def record_cost(self, usd: float, calls: int | None = None) -> None:
        """Actual spend of one sampled turn (and, optionally, its actual judge calls, e.g.
        when an arbiter was needed), correcting what ``decide`` charged up front."""
        with self._lock:
            if self._usd is not None:
                self._usd.adjust(self._estimate - usd)
            if self._calls is not None and calls is not None:
                self._calls.adjust(self._calls_per_turn - calls)

    def reserve(self, calls: int) -> str | None:
        """Charge ``calls`` judge calls of work outside the stream (a scheduled job such as
        rubric grading) to the same hourly buckets, at ``estimated_usd_per_call`` each.
        Returns None when admitted, else the refusal reason (``budget_calls``/``budget_usd``);
        ``settle`` corrects the charge once the actual spend is known."""
        estimate = self._config.estimated_usd_per_call * calls
        with self._lock:
            if self._calls is not None and self._calls.level < calls:
                return _OVER_CALLS.reason
            if self._usd is not None and not self._usd.try_take(estimate):
                return _OVER_USD.reason
            if self._calls is not None:
                self._calls.try_take(calls)
        return None

    def settle(self, reserved_calls: int, calls: int, usd: float) -> None:
        """Actual spend of work admitted by ``reserve(reserved_calls)``."""
        estimate = self._config.estimated_usd_per_call * reserved_calls
        with self._lock:
            if self._usd is not None:
                self._usd.adjust(estimate - usd)
            if self._calls is not None:
                self._calls.adjust(reserved_calls - calls)

    def budget_levels(self) -> dict[str, float]:
        """Remaining budget per bucket (for a gauge or a status page)."""
        with self._lock:
            levels: dict[str, float] = {}
            if self._calls is not None:
                levels["calls"] = self._calls.level
            if self._usd is not None:
                levels["usd"] = self._usd.level
            return levels
