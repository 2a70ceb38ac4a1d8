"""The batch's sampling policy: every turn of the file is judged, each event id once.

The sample step asks ``decide`` for every decoded turn, in file order. The first turn with an
event id is sampled; a later one with the same id (a replayed event) is not, under the reason
``duplicate``, unless the granular file already holds that id: then it goes on too, so the
look-up step counts it as already judged again, as the first one. No budget: a batch run is
asked for by a person, for every turn of the file.
"""

from __future__ import annotations

from collections.abc import Container

from monitor.runtime.clock import SystemClock
from monitor.sampling.budget import HourlyBudget
from monitor.sampling.sampler import SampleDecision
from monitor.schema.turn import TurnEvent

JUDGED = SampleDecision(True, "batch")
DUPLICATE = SampleDecision(False, "duplicate")


class JudgeAll:
    """Implements the pipeline's ``SamplingPolicy``."""

    def __init__(self, existing: Container[str]) -> None:
        self._existing = existing
        self._seen: set[str] = set()
        # Unlimited, and drawn on by no decision: the batch's turns carry no reservation.
        self.budget = HourlyBudget(None, None, 0.0, SystemClock())

    def decide(self, turn: TurnEvent, *, rule: str | None = None) -> SampleDecision:
        event_id = turn.event_id
        if event_id not in self._seen:
            self._seen.add(event_id)
            return JUDGED
        return JUDGED if event_id in self._existing else DUPLICATE
