"""The Judge protocol: one turn in, one Judgment out, never an exception for bad output.

Implementations must be safe to call from several threads at once (the batch runner and the
daemon call ``judge`` from a thread pool) and must turn every failure they can anticipate into
a ``Judgment`` with ``status="judge_failed"`` and a bounded ``failure_reason``.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from monitor.schema.turn import Judgment, TurnEvent

# Bounded values of Judgment.failure_reason (they become a metric label).
FAILURE_REASONS: tuple[str, ...] = (
    "invalid_output",  # replied, but never with valid scores within the retries
    "truncated",  # every reply was cut at max_output_tokens before it was valid
    "rate_limited",  # 429 until the transport retries ran out
    "server_error",  # 5xx until the retries ran out
    "timeout",  # no reply within the timeout, every try
    "connection",  # endpoint unreachable
    "bad_request",  # 4xx other than 429: will not succeed by retrying
    "auth",  # 401/403
    "internal",  # a bug on our side; logged with a traceback
)


@runtime_checkable
class Judge(Protocol):
    """Scores one turn on the eight case-aware metrics."""

    @property
    def name(self) -> str:
        """Configured name (a bounded metric label), e.g. 'heuristic' or 'primary'."""
        ...

    def judge(self, turn: TurnEvent) -> Judgment:
        """Score the turn. Failures are returned as a judge_failed Judgment, not raised."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...
