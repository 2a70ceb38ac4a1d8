"""What the redact and sample steps decide about one turn, as pure functions (no metrics, no
budget, no I/O): the steps apply them on the consumer's thread, and the screening processes
(``screen.py``) apply the very same ones ahead of them, so screening can never decide
otherwise. Decoding needs no entry here: both call ``consumers.decode.decode_value``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple, Protocol

from monitor.models import TurnEvent
from monitor.redaction import Redactor, TooLargeToRedact, TurnRedaction
from monitor.redaction.redactor import NONE_REPLACED
from monitor.sampling.sampler import SampleDecision

# Why a turn that cannot be redacted is neither judged nor stored (bounded label values).
TOO_LARGE = SampleDecision(False, "redaction_too_large")
FAILED = SampleDecision(False, "redaction_failed")

TRIPWIRE_REASON = "rule:identifier_tripwire"


# The turn to pass on, and the values replaced in it per kind: the redactor's own result,
# passed on as it is (a second tuple per consumed turn cost more than the clean path's look-ups).
Redacted = TurnRedaction


class Unredactable(NamedTuple):
    """A turn to finish unjudged: why (a skip decision) and what to log about it."""

    decision: SampleDecision
    detail: str
    why: Mapping[str, object]


def redact_for_judging(
    redactor: Redactor, turn: TurnEvent, *, forward_redacted: bool
) -> Redacted | Unredactable:
    """The redacted turn (``forward_redacted``: what the judges see), or the unchanged turn
    once its size is checked (only the store redacts it); ``Unredactable`` when the turn is
    too large to redact or a detector fails on it (raw text must not go on)."""
    try:
        if forward_redacted:
            return redactor.redact_turn(turn)
        redactor.check_size(turn)
        return Redacted(turn, NONE_REPLACED)
    except TooLargeToRedact as exc:
        return Unredactable(TOO_LARGE, str(exc), {"chars": exc.chars, "limit": exc.limit})
    except Exception as exc:  # a detector bug must not let raw text through
        name = type(exc).__name__
        return Unredactable(FAILED, f"a detector failed: {name}", {"error": name})


class TripwireResult(Protocol):
    @property
    def kinds(self) -> Sequence[str]:
        """The identifier kinds the answer nearly mismatches (empty: the turn is clean)."""
        ...

    @property
    def truncated(self) -> bool:
        """The turn was larger than the tripwire checks."""
        ...


Tripwire = Callable[[TurnEvent], TripwireResult]


def tripwire_rule(result: TripwireResult) -> str | None:
    """The always-judge rule a tripwire result makes: a tripped turn is sampled."""
    return TRIPWIRE_REASON if result.kinds else None
