"""The ``outcomes`` section: end-user feedback and case outcomes (``docs/outcomes.md``): how long
an outcome waits for its turn, how a ``format: mapped`` outcomes topic is read, and the join job
that pairs outcomes with turns and verdicts on the lease.
"""

from __future__ import annotations

from pydantic import Field

from monitor.config.section import Section


class OutcomesConfig(Section):
    """Outcome events: the join window, the join job and the mapping of a team's own shape."""

    join_window_seconds: float = Field(
        default=86400.0,
        gt=0,
        description="How long an outcome whose turn (or case) is not stored yet waits for it; "
        "past it the outcome stays stored, counted unmatched, and is joined no more.",
    )
    join_interval_seconds: float = Field(
        default=15.0, gt=0, description="How often the join job pairs outcomes with verdicts."
    )
    max_buffered: int = Field(
        default=5000,
        gt=0,
        description="Outcome events held for one database write; past it intake waits.",
    )
    mapping: dict[str, str] = Field(
        default_factory=dict,
        description="JMESPath expression per outcome-event field, for outcomes topics of "
        "format mapped (docs/outcomes.md).",
    )
    retain_unsampled: bool = Field(
        default=False,
        description="Keep unsampled turns (redacted, bounded) so that negative feedback on one "
        "gets it judged once (sampling reason feedback).",
    )
    retain_process: bool = Field(
        default=True,
        description="Keep unsampled turns from a process of their own: the consumer hands it "
        "records' places (Kafka, a batch at a time) or bytes, and it stores them, decoding and "
        "redacting the bytes, off the daemon's process (false: on a thread of the daemon, "
        "which off Kafka costs intake more).",
    )
    retained_seconds: float = Field(
        default=86400.0,
        gt=0,
        description="How long an unsampled turn is kept for feedback to arrive.",
    )
    max_retained_turns: int = Field(
        default=100_000,
        gt=0,
        description="At most this many unsampled turns kept; past it the oldest go first.",
    )
    feedback_judging_interval_seconds: float = Field(
        default=15.0, gt=0, description="How often turns with negative feedback are judged."
    )
