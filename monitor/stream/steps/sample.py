"""Sampling: a turn not selected is finished here (counted by reason); the rest go on.

A sampled turn goes on in an envelope carrying its ``Reservation`` of the hourly budget, which
the steps after settle once (``base.Envelope``). The sampler's decision for a record is kept
while the next step rejects it, so offering the same record again never consumes a second unit
of the hourly budget; a kept decision whose record does not come back (the loop dropped it: a
revoke, a rewind, the stop) gives its reservation back when the next record comes, when its
partition is discarded, or at ``close``.

A budget that refuses turns (``budget_calls``, ``budget_usd``: spent for the hour, or a limit of
0) is logged once when it starts refusing, naming the setting, and once when it admits again.

Decisions are counted in a dict and added to the counters once per ``poll`` (and on ``join``):
a Prometheus increment takes a lock, and on the ingest path it was a per-record cost.

With a ``tripwire`` (the identifier tripwire, ``monitor.judging.heuristic.tripwire``) every
turn is checked before the decision, sampled or not, and counted; a turn that trips it is
sampled with the reason ``rule:identifier_tripwire`` (configured always-judge rules keep their
own reason; the hourly budget applies either way). A turn larger than the tripwire's bounds is
checked as far as they go and counted as truncated.

Under the cascade a record may come with the cheap look already taken (``Envelope.look``: a
screening process computed its cell and its tripwire result, ``TurnDecisions.cascade_look``).
The step then counts that tripwire result and draws with that cell against the live
probabilities, which only this process holds; it computes them itself only for a record that
came without (no screening processes, or one they handed on undecided). Either way the same
turns are counted, looked at and drawn.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Protocol

import structlog

from consumers.records import TopicPartition
from monitor.errors import MessageRejected
from monitor.sampling.sampler import NOT_SAMPLED, SampleDecision
from monitor.schema.turn import TurnEvent
from monitor.stream.steps.base import DoneStep, Envelope, ProcessingStep, SamplingMetrics
from monitor.stream.steps.decisions import TRIPWIRE_REASON, Tripwire, tripwire_rule

log = structlog.get_logger(__name__)

# The setting to change when the budget refuses turns, by refusal reason.
BUDGET_SETTINGS = {
    "budget_calls": "sampling.budget_calls_per_hour",
    "budget_usd": "sampling.budget_usd_per_hour",
}


class Decider(Protocol):
    def decide(self, turn: TurnEvent, *, rule: str | None = None) -> SampleDecision: ...


class CascadeDecider(Protocol):
    def looks_at(self, turn: TurnEvent, *, rule: str | None = None) -> bool: ...

    def decide_cascade(
        self, turn: TurnEvent, cell: str, *, rule: str | None = None
    ) -> SampleDecision: ...


# The cascade's cheap look: a turn -> its cell (``decisions.cheap_cell``).
CheapLook = Callable[[TurnEvent], str]


class SampleStep:
    def __init__(
        self,
        next_step: ProcessingStep[TurnEvent],
        done: DoneStep,
        sampler: Decider,
        metrics: SamplingMetrics,
        tripwire: Tripwire | None = None,
        cascade: tuple[CascadeDecider, CheapLook] | None = None,
    ) -> None:
        """``cascade``: the sampler's cascade and the cheap look every turn gets first
        (``sampling.strategy: cascade``); each turn's cell is counted."""
        self._next = next_step
        self._cascade = cascade
        self._cells: dict[tuple[str, str], int] = {}  # (assistant, cell) -> turns looked at
        self._done = done
        self._sampler = sampler
        self._metrics = metrics
        self._held: tuple[Envelope[TurnEvent], SampleDecision] | None = None
        # (assistant, sampled, reason) -> turns decided since the last flush; plain values
        # because a frozen dataclass hashes in Python.
        self._counts: dict[tuple[str, bool, str], int] = {}
        self._tripwire = tripwire
        self._checked: dict[str, int] = {}  # assistant -> turns checked since the last flush
        self._mismatches: dict[tuple[str, str], int] = {}  # (assistant, kind) -> turns
        self._truncated: dict[str, int] = {}  # assistant -> turns checked only in part
        # The budget's refusal reason while it refuses turns, and how many it refused.
        self._refusing: str | None = None
        self._refused = 0

    def submit(self, message: Envelope[TurnEvent]) -> None:
        held = self._held
        if held is not None and held[0].offset == message.offset and held[0].tp == message.tp:
            decision = held[1]
        else:
            if held is not None:
                self._let_go()
            rule = None
            look = message.look
            if look is not None:  # taken by a screening process: its tripwire result, counted
                if self._tripwire is not None:
                    rule = self._count_trip(message.payload, look.kinds, look.truncated)
            elif self._tripwire is not None:
                rule = self._trip(self._tripwire, message.payload)
            if self._cascade is not None:
                cell = look.cell if look is not None else None
                decision = self._look(self._cascade, message.payload, rule, cell)
            elif rule is not None:
                decision = self._sampler.decide(message.payload, rule=rule)
            else:
                decision = self._sampler.decide(message.payload)
        if decision.sampled:
            if self._refusing is not None:
                self._budget_admits()
            reservation = decision.reservation
            if reservation is not None:
                message = Envelope(message.tp, message.offset, message.payload, reservation)
            try:
                self._next.submit(message)
            except MessageRejected:
                self._held = (message, decision)  # offered again: decided once
                raise
        else:
            reason = decision.reason
            if reason in BUDGET_SETTINGS:
                self._budget_refuses(reason)
            self._done.submit(message)
        self._held = None
        key = (message.payload.assistant.name, decision.sampled, decision.reason)
        counts = self._counts
        counts[key] = counts.get(key, 0) + 1

    def _let_go(self) -> None:
        """The held record will not be offered again: its reservation goes back."""
        held, self._held = self._held, None
        if held is not None and held[1].reservation is not None:
            held[1].reservation.release()

    def _budget_refuses(self, reason: str) -> None:
        self._refused += 1
        if self._refusing != reason:
            self._refusing = reason
            log.warning(
                "the hourly judge budget refuses sampled turns; they are skipped, not judged",
                reason=reason,
                setting=BUDGET_SETTINGS[reason],
            )

    def _budget_admits(self) -> None:
        log.info("the hourly judge budget admits turns again", skipped=self._refused)
        self._refusing = None
        self._refused = 0

    # The rebalance protocol (``rebalance.py``): only a decision kept for a record the loop
    # offered and then dropped (its partition revoked or rewound) is held here.
    def hold(self, tps: Collection[TopicPartition]) -> int:
        return 0

    def running_in(self, tps: Collection[TopicPartition]) -> int:
        return 0

    def release(self, owned: Collection[TopicPartition]) -> None:
        if self._held is not None and self._held[0].tp not in owned:
            self._let_go()

    def discard(self, tps: Collection[TopicPartition]) -> None:
        if self._held is not None and self._held[0].tp in tps:
            self._let_go()

    def wait_any(self, timeout: float) -> bool:
        return False

    def _trip(self, tripwire: Tripwire, turn: TurnEvent) -> str | None:
        result = tripwire(turn)
        assistant = turn.assistant.name
        self._checked[assistant] = self._checked.get(assistant, 0) + 1
        if result.truncated:
            self._truncated[assistant] = self._truncated.get(assistant, 0) + 1
        kinds = result.kinds
        if not kinds:
            return None  # a clean turn: what ``tripwire_rule`` makes of it, without the call
        for kind in kinds:
            key = (assistant, kind)
            self._mismatches[key] = self._mismatches.get(key, 0) + 1
        return tripwire_rule(result)

    def _count_trip(self, turn: TurnEvent, kinds: Sequence[str], truncated: bool) -> str | None:
        """``_trip`` for a result a screening process computed (``Look``): counted the same."""
        assistant = turn.assistant.name
        self._checked[assistant] = self._checked.get(assistant, 0) + 1
        if truncated:
            self._truncated[assistant] = self._truncated.get(assistant, 0) + 1
        if not kinds:
            return None
        for kind in kinds:
            key = (assistant, kind)
            self._mismatches[key] = self._mismatches.get(key, 0) + 1
        return TRIPWIRE_REASON  # ``tripwire_rule`` of a result with these kinds

    def _look(
        self,
        cascade: tuple[CascadeDecider, CheapLook],
        turn: TurnEvent,
        rule: str | None,
        cell: str | None = None,
    ) -> SampleDecision:
        """``cell``: the turn's cell as a screening process computed it (None: computed here
        when the turn is looked at)."""
        decider, look = cascade
        if not decider.looks_at(turn, rule=rule):
            return NOT_SAMPLED  # beyond the cheap look's share: never drawn, never looked at
        if cell is None:
            cell = look(turn)
        key = (turn.assistant.name, cell)
        self._cells[key] = self._cells.get(key, 0) + 1
        return decider.decide_cascade(turn, cell, rule=rule)

    def _flush_counts(self) -> None:
        if self._cells:
            cells, self._cells = self._cells, {}
            for (assistant, cell), n in cells.items():
                self._metrics.record_cheap_look(assistant, cell, n)
        counts, self._counts = self._counts, {}
        for (assistant, sampled, reason), n in counts.items():
            self._metrics.record_sampling(assistant, SampleDecision(sampled, reason), n)
        if self._checked:
            checked, self._checked = self._checked, {}
            mismatches, self._mismatches = self._mismatches, {}
            truncated, self._truncated = self._truncated, {}
            for assistant, n in checked.items():
                kinds = [(k, m) for (a, k), m in mismatches.items() if a == assistant]
                self._metrics.record_tripwire(assistant, n, kinds, truncated.get(assistant, 0))

    def poll(self) -> None:
        self._flush_counts()
        self._next.poll()

    def join(self, timeout: float | None = None) -> None:
        self._flush_counts()
        self._next.join(timeout)

    def close(self) -> None:
        self._let_go()
        self._next.close()
