"""What the decode, redact and sample steps decide about one turn, as pure functions and one
picklable object (no metrics, no budget, no I/O).

``TurnDecisions`` holds them for one chain: which decoder reads a topic's records (casewatch's
own turn event, or a ``format: mapped`` topic's mapping), the redactor and what it forwards,
the identifier tripwire, and the sampling rules and rates (``Sampler.reason_for``). It is built
once per process (``prepare``, through ``pipeline.chain_decisions`` and
``turn_steps.turn_decisions``) and given to the steps, which call its parts on the
consumer's thread, to the screening processes (``screen.py``), which get it pickled and run
``finishes_unjudged`` ahead of the steps, a batch at a time (``unjudged_turns``; under
``sampling.strategy: cascade``, ``cascade_look``: the cheap look too, handed to the sample
step with the record). So screening can never decide otherwise than the steps, on any topic.
What redaction decides (``JudgingRedaction``) lives below, in ``sampling/judging_redaction.py``,
where the judge canary reaches it too: it is handed this object's ``redaction``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from consumers.decode import decode_value
from monitor.config.sampling import SamplingConfig
from monitor.errors import InvalidEvent
from monitor.judging.heuristic.judge import score_turn
from monitor.redaction import Redactor
from monitor.redaction.redactor import NONE_REPLACED
from monitor.runtime.clock import SystemClock
from monitor.sampling.judging_redaction import (
    FAILED,
    TOO_LARGE,
    JudgingRedaction,
    Redacted,
    Unredactable,
    redact_for_judging,
)
from monitor.sampling.sampler import Sampler
from monitor.schema.turn import TurnEvent
from monitor.scoring.turn import DEFAULT_CRITICAL_METRICS, DEFAULT_PROFILE, turn_band
from monitor.stream.steps.base import Look

TRIPWIRE_REASON = "rule:identifier_tripwire"

# One raw record value (and the size bound) -> its turn, or ``InvalidEvent`` with the reason.
Decoder = Callable[[bytes | None, int], TurnEvent]


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


def cheap_cell(turn: TurnEvent) -> str:
    """The cascade's cheap look at a turn: the offline heuristic judge's band for it (default
    weights and critical metrics; a stratum, so any fixed rule keeps the weighted figures
    unbiased, and the closer it follows the LLM judge the fewer calls it takes)."""
    scores = score_turn(turn).score_map()
    return turn_band(scores, DEFAULT_PROFILE, DEFAULT_CRITICAL_METRICS).value


def tripwire_rule(result: TripwireResult) -> str | None:
    """The always-judge rule a tripwire result makes: a tripped turn is sampled."""
    return TRIPWIRE_REASON if result.kinds else None


class TurnDecisions:
    """The decisions of one chain about one record, from its bytes to its sampling reason.

    Picklable (the screening processes get it as their initializer's argument): a mapped
    topic's decoder is the compiled ``TurnMapping``'s ``decode``, the redactor carries its
    policy and key, the tripwire is a module-level function, and the rules' ``Sampler`` is
    rebuilt from ``sampling`` where it is unpickled (its budget, a lock and a clock, is no
    decision and is never used here).
    """

    def __init__(
        self,
        max_bytes: int,
        *,
        decoders: Mapping[str, Decoder] | None = None,
        redaction: JudgingRedaction | None = None,
        tripwire: Tripwire | None = None,
        sampling: SamplingConfig | None = None,
    ) -> None:
        """``decoders``: per topic, a decoder other than casewatch's own turn event.
        ``redaction``: the redact step's (None: the chain has no redact step), the judge
        canary's too (handed to it as ``JobInputs.canary_redaction``).
        ``sampling``: the rules and rates ``reason_for`` applies (None: this chain's sampling
        has no reasons to give, e.g. ``casewatch judge``, which judges every turn)."""
        self.max_bytes = max_bytes
        self.decoders: Mapping[str, Decoder] = dict(decoders or {})
        self.redaction = redaction
        self.tripwire = tripwire
        self.sampling = sampling
        self._sampler = Sampler(sampling, SystemClock()) if sampling is not None else None
        # ``sampling.strategy: cascade``: a screening process takes the cheap look
        # (``cascade_look``) where the sample step would.
        self.cascading = sampling is not None and sampling.strategy == "cascade"

    def __reduce__(self) -> tuple[Any, ...]:
        # The arguments, not the state: the sampler is rebuilt from its configuration.
        return (
            _rebuild,
            (self.max_bytes, self.decoders, self.redaction, self.tripwire, self.sampling),
        )

    @property
    def redactor(self) -> Redactor | None:
        """The redact step's redactor (None: the chain redacts no turn)."""
        return None if self.redaction is None else self.redaction.redactor

    def decoder(self, topic: str) -> Decoder:
        """What reads ``topic``'s records: its own decoder, else casewatch's turn event."""
        decoders = self.decoders
        return decoders.get(topic, decode_value) if decoders else decode_value

    @property
    def only_decoder(self) -> Decoder | None:
        """The decoder of every topic when no topic has its own (casewatch's turn event), for
        a step to call with no look-up per record; None when topics are read differently."""
        return None if self.decoders else decode_value

    def decode(self, topic: str, value: bytes | None) -> TurnEvent:
        """``value`` as ``topic``'s turn; ``InvalidEvent`` with the reason."""
        decoders = self.decoders  # ``decoder``, without a call per consumed record
        if decoders:
            return decoders.get(topic, decode_value)(value, self.max_bytes)
        return decode_value(value, self.max_bytes)

    def redact(self, turn: TurnEvent) -> Redacted | Unredactable:
        """What the redact step makes of ``turn`` (unchanged when the chain has none)."""
        if self.redaction is None:
            return Redacted(turn, NONE_REPLACED)
        return self.redaction.redact(turn)

    def reason_for(self, turn: TurnEvent, *, rule: str | None = None) -> str | None:
        """Why ``turn`` would be sampled if the budget allows (``Sampler.reason_for``); None
        also when this chain's sampling gives no reasons."""
        if self._sampler is None:
            return None
        return self._sampler.reason_for(turn, rule=rule)

    def finishes_unjudged(self, topic: str, value: bytes | None) -> str | None:
        """The assistant of a record the steps would finish as ``not_sampled`` with a clean
        tripwire check, deciding as they do in their order (decode, redact, tripwire, the
        sampling reason); None for any other record, which the steps then decide themselves:
        invalid, unredactable, a tripwire hit or a truncated check, a rule or the rate."""
        turn = self.unjudged_turn(topic, value)
        return None if turn is None else turn.assistant.name

    def kept_turn(self, turn: TurnEvent) -> TurnEvent | None:
        """An unsampled turn as it is kept for feedback (``outcomes.retain_unsampled``), from
        the turn the redact step forwarded: redacted as the pipeline's ``RetainingDone``
        redacts it (here when the chain does not redact before judging); None when it cannot
        be redacted (never kept unredacted)."""
        r = self.redaction
        if r is not None and not r.forward_redacted:
            try:
                return r.redactor.redact_turn(turn).turn
            except Exception:  # too large or a detector failed: counted by the caller
                return None
        return turn

    def kept_row(self, turn: TurnEvent) -> tuple[str, str, str, str] | None:
        """``kept_turn`` as the row it is kept as: (event id, conversation id, assistant, the
        redacted turn as JSON text); None when it cannot be redacted."""
        kept = self.kept_turn(turn)
        if kept is None:
            return None
        return (kept.event_id, kept.conversation_id, kept.assistant.name, kept.model_dump_json())

    def read_back(self, topic: str, value: bytes | None) -> TurnEvent | None:
        """A turn kept as its record's place, from the record read back: decoded, redacted as
        the redact step would and then as it is kept (``kept_turn``); None when it cannot be
        redacted. ``InvalidEvent`` when it cannot be decoded."""
        redacted = self.redact(self.decode(topic, value))
        if isinstance(redacted, Unredactable):
            return None
        return self.kept_turn(redacted.turn)

    def unjudged_turn(self, topic: str, value: bytes | None) -> TurnEvent | None:
        """``finishes_unjudged``'s turn (as the redact step forwards it)."""
        return next(self.unjudged_turns([value], [topic]))

    def unjudged_turns(
        self, values: Sequence[bytes | None], topics: Sequence[str] | None = None
    ) -> Iterator[TurnEvent | None]:
        """``unjudged_turn`` of each record of a batch (what a screening process runs): the
        record ``values``, with their ``topics`` when a topic has a decoder of its own (None:
        there is none, ``only_decoder``, and the topic decides nothing). Each part of the
        decision is looked up once a batch, not once a record, and called as its method would
        call it (``decode``, ``JudgingRedaction.redact``, the tripwire, ``reason_for``): the
        screened path had grown a call per part and record (bench/README.md, "Screening per
        turn"). One turn at a time: a batch's turns held at once would cost the collector
        more than the calls saved."""
        decoders, max_bytes = self.decoders, self.max_bytes
        if topics is None:
            if decoders:
                raise ValueError("records of topics with a decoder of their own need their topic")
            topics = [""] * len(values)
        elif len(topics) != len(values):
            raise ValueError(f"{len(topics)} topics for {len(values)} records")
        sampler = self._sampler
        reason_for = None if sampler is None else sampler.reason_for
        redaction, tripwire = self.redaction, self.tripwire
        redactor = None if redaction is None else redaction.redactor
        forward_redacted = redaction is not None and redaction.forward_redacted
        for topic, value in zip(topics, values, strict=True):
            try:
                if decoders:
                    turn = decoders.get(topic, decode_value)(value, max_bytes)
                else:
                    turn = decode_value(value, max_bytes)
            except InvalidEvent:
                yield None  # dead-lettered with its reason by the decode step
                continue
            if redactor is not None:
                redacted = redact_for_judging(redactor, turn, forward_redacted=forward_redacted)
                if isinstance(redacted, Unredactable):
                    yield None  # skipped with its reason by the redact step
                    continue
                turn = redacted.turn
            if tripwire is not None:
                hit = tripwire(turn)
                if hit.kinds or hit.truncated:  # counted (kinds, truncation) by the sample step
                    yield None
                    continue
            # No reasons to give (``reason_for``'s None): no turn is finished unjudged.
            yield turn if reason_for is not None and reason_for(turn) is None else None

    def cascade_look(
        self, topic: str, value: bytes | None
    ) -> tuple[TurnEvent, Mapping[str, int]] | Look | None:
        """What a screening process makes of a record under the cascade, deciding as the steps
        do in their order (decode, redact, tripwire, the cheap look's share, the cell):

        - the turn and what its redaction replaced per kind, when the sample step would
          finish it as ``not_sampled`` without a look: beyond ``cascade_look_share``, no rule,
          a clean and whole tripwire check (it is finished in the process, as
          ``finishes_unjudged``'s turns are, and its redactions are counted there);
        - its ``Look``, when it goes on to the steps: the cell the sample step would compute
          (``cheap_cell``; None beyond the share) and the tripwire's result, which the sample
          step counts and draws with instead of computing them;
        - None for a record the steps decide otherwise (invalid, unredactable): it goes on
          with no look, and the steps decide it as without screening.
        """
        try:
            turn = self.decode(topic, value)
        except InvalidEvent:
            return None  # dead-lettered with its reason by the decode step
        replaced: Mapping[str, int] = NONE_REPLACED
        if self.redaction is not None:
            redacted = self.redaction.redact(turn)
            if isinstance(redacted, Unredactable):
                return None  # skipped with its reason by the redact step
            turn, replaced = redacted.turn, redacted.counts
        kinds: tuple[str, ...] = ()
        truncated = False
        if self.tripwire is not None:
            hit = self.tripwire(turn)
            kinds, truncated = tuple(hit.kinds), hit.truncated
        sampler = self._sampler
        if sampler is None or sampler.cascade is None:
            raise ValueError("cascade_look needs sampling.strategy: cascade")
        rule = TRIPWIRE_REASON if kinds else None  # ``tripwire_rule``
        if sampler.looks_at(turn, rule=rule):
            return Look(cheap_cell(turn), kinds, truncated)
        if truncated:  # counted as truncated by the sample step, which finishes it there
            return Look(None, kinds, truncated)
        return turn, replaced  # not looked at: no rule picks it (``looks_at``), never drawn


def _rebuild(
    max_bytes: int,
    decoders: Mapping[str, Decoder],
    redaction: JudgingRedaction | None,
    tripwire: Tripwire | None,
    sampling: SamplingConfig | None,
) -> TurnDecisions:
    return TurnDecisions(
        max_bytes,
        decoders=decoders,
        redaction=redaction,
        tripwire=tripwire,
        sampling=sampling,
    )


__all__ = [
    "FAILED",
    "TOO_LARGE",
    "Decoder",
    "Look",
    "Redacted",
    "Tripwire",
    "TripwireResult",
    "TurnDecisions",
    "Unredactable",
    "cheap_cell",
    "redact_for_judging",
    "tripwire_rule",
]
