"""The ``sampling`` section: which turns are judged (a share of conversations, rules that
always judge) and what judging may cost per hour. Read by ``monitor/sampling``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from monitor.config.section import Section


class AlwaysJudgeRule(Section):
    """Judge the turn regardless of the sampling rate when the rule matches."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,39}$", description="Bounded label value.")
    field: str = Field(description="'query', 'answer', 'feedback', or 'labels.<key>'.")
    pattern: str | None = Field(default=None, description="Regex searched in the field.")
    equals: str | None = Field(default=None, description="Exact value of the field.")


# Safe defaults for a monitor that may call a paid API: a tenth of the conversations
# and at most this many judge calls (and USD, once prices are configured) per hour. Raise them
# on purpose; the demo judges everything (monitor.demo.options).
DEFAULT_SAMPLING_RATE = 0.1
DEFAULT_BUDGET_CALLS_PER_HOUR = 1000.0
DEFAULT_BUDGET_USD_PER_HOUR = 5.0
# The cascade: every turn keeps at least this probability of reaching the LLM judge, and the
# draw aims at this share of the hourly call budget when no target of its own is set.
DEFAULT_CASCADE_FLOOR = 0.01
CASCADE_BUDGET_SHARE = 0.9


class SamplingConfig(Section):
    """Which turns are judged: a share of conversations, rules, and hourly budgets."""

    default_rate: float = Field(
        default=DEFAULT_SAMPLING_RATE,
        ge=0,
        le=1,
        description="Share of conversations judged (chosen by a hash of conversation_id).",
    )
    rates: dict[str, float] = Field(default_factory=dict, description="Per assistant name.")
    always_judge: list[AlwaysJudgeRule] = Field(default_factory=list)
    # null: no budget (every sampled turn is judged, whatever it costs). 0: nothing is judged
    # (each sampled turn is skipped ``budget_calls``, and the daemon says so once).
    budget_calls_per_hour: float | None = Field(default=DEFAULT_BUDGET_CALLS_PER_HOUR, ge=0)
    budget_usd_per_hour: float | None = Field(
        default=DEFAULT_BUDGET_USD_PER_HOUR,
        ge=0,
        description="USD per hour at most, from the judges' prices (null: no limit; 0: none).",
    )
    estimated_usd_per_call: float = Field(
        default=0.0,
        ge=0,
        description="USD reserved per judge request until its actual cost is known.",
    )
    # Check every consumed turn's answer for near misses of evidence identifiers (no network);
    # a hit is judged (reason rule:identifier_tripwire) within the budget.
    identifier_tripwire: bool = True
    # uniform: a share of conversations (``default_rate``/``rates``). cascade: every turn gets the
    # offline judge's cheap look and reaches the LLM judge with a probability that grows with
    # how often the LLM judge calls such turns severe (docs/cascade.md); each drawn turn stores
    # its probability, and the weighted figures stay unbiased.
    strategy: Literal["uniform", "cascade"] = "uniform"
    cascade_floor: float = Field(
        default=DEFAULT_CASCADE_FLOOR,
        gt=0,
        le=1,
        description="The cascade's least probability of drawing a turn (never 0).",
    )
    cascade_look_share: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="Share of conversations the cheap look runs on (the rest are never drawn "
        "but by a rule): bounds its CPU, milliseconds a turn (docs/cascade.md).",
    )
    cascade_target_calls_per_hour: float | None = Field(
        default=None,
        ge=0,
        description="LLM calls per hour the cascade's draw aims at "
        "(null: 90 % of budget_calls_per_hour).",
    )

    @model_validator(mode="after")
    def _cascade_has_a_target(self) -> SamplingConfig:
        if self.cascade_floor > self.cascade_look_share:
            raise ValueError("cascade_floor must not exceed cascade_look_share")
        if (
            self.strategy == "cascade"
            and self.cascade_target_calls_per_hour is None
            and self.budget_calls_per_hour is None
        ):
            raise ValueError(
                "strategy 'cascade' needs cascade_target_calls_per_hour or "
                "budget_calls_per_hour: the draw is scaled to a number of calls per hour"
            )
        return self

    def cascade_target(self) -> float:
        """LLM calls per hour the cascade's draw aims at."""
        if self.cascade_target_calls_per_hour is not None:
            return self.cascade_target_calls_per_hour
        return CASCADE_BUDGET_SHARE * (self.budget_calls_per_hour or 0.0)
