"""Whether a turn may go on to the judges, and as what, as far as redaction decides it (pure).

With ``redaction.before_judging`` the judges see the redacted turn; with only
``redaction.stored_turns`` they see it unchanged, once its size is checked (the store redacts
it, so a turn too large to redact is never judged either). A turn too large to redact, or one
a detector fails on, is not judged: its raw text must not go on. The stream's redact step and
its screening processes (``stream/steps/decisions.py``'s ``TurnDecisions``) and the judge
canary (``jobs/``, below the stream) decide by this one ``JudgingRedaction``, built from the
``redaction`` section the same way, so the canary's judges see what the live ones see.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from monitor.redaction import Redactor, TooLargeToRedact, TurnRedaction
from monitor.redaction.config import RedactionConfig
from monitor.redaction.redactor import NONE_REPLACED
from monitor.sampling.sampler import SampleDecision
from monitor.schema.turn import TurnEvent

# Why a turn that cannot be redacted is neither judged nor stored (bounded label values).
TOO_LARGE = SampleDecision(False, "redaction_too_large")
FAILED = SampleDecision(False, "redaction_failed")

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


@dataclass(frozen=True)
class JudgingRedaction:
    """The redactor turns go through before judging, and whether the judges get its result.
    Picklable (a screening process gets it with the chain's decisions)."""

    redactor: Redactor
    forward_redacted: bool  # ``redaction.before_judging``

    @classmethod
    def from_config(cls, config: RedactionConfig | None) -> JudgingRedaction | None:
        """The one way it is built from the section: None when no turn is redacted (off, or
        neither for the judges nor for storage)."""
        if config is None or not config.active:
            return None
        return cls(Redactor(config.policy()), config.before_judging)

    def redact(self, turn: TurnEvent) -> Redacted | Unredactable:
        return redact_for_judging(self.redactor, turn, forward_redacted=self.forward_redacted)
