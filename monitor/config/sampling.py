"""The ``sampling`` section: which turns are judged (a share of conversations, rules that
always judge) and what judging may cost per hour. Read by ``monitor/sampling``.
"""

from __future__ import annotations

from pydantic import Field

from monitor.config.section import Section


class AlwaysJudgeRule(Section):
    """Judge the turn regardless of the sampling rate when the rule matches."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,39}$", description="Bounded label value.")
    field: str = Field(description="'query', 'answer', 'feedback', or 'labels.<key>'.")
    pattern: str | None = Field(default=None, description="Regex searched in the field.")
    equals: str | None = Field(default=None, description="Exact value of the field.")


# Safe defaults for a monitor that may call a paid API: a tenth of the conversations
# and at most this many judge calls (and USD, once prices are configured) per hour. Raise them
# on purpose; the demo judges everything (monitor.demo.run).
DEFAULT_SAMPLING_RATE = 0.1
DEFAULT_BUDGET_CALLS_PER_HOUR = 1000.0
DEFAULT_BUDGET_USD_PER_HOUR = 5.0


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
